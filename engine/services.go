package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
)

// ErrNoService is matched (errors.Is) by ServiceAs's error for a name no
// service has; the error names it.
var ErrNoService = errors.New("engine: no such service")

// ServiceTypeError is ServiceAs's error for a service that is not of the
// type asked for: the caller and the plugin that registered it disagree on
// what it is, which a plain "not found" would hide.
type ServiceTypeError struct {
	Name string
	Want string // the type asked for
	Got  string // the service's dynamic type
}

// Error names the service and both types.
func (e *ServiceTypeError) Error() string {
	return fmt.Sprintf("engine: service %s is a %s, not a %s", quoteName(e.Name), e.Got, e.Want)
}

// services are the named Go values the host (WithService) and native
// plugins (Extension.Services) offer to other code: a plugin's client, a
// cache, a store that tools of another plugin share. They have their own
// lock, not the lifecycle's, so that code running during Initialize (a
// plugin's Open) may look one up.
type services struct {
	mu     sync.RWMutex
	byName map[string]service
}

type service struct {
	value any
	host  bool   // WithService gave it
	owner string // else the plugin that registered it
}

// WithService offers v to other code as the service called name (see
// Service). Of one name, the host's service is used over a plugin's (see
// Precedence in the package doc), and the last WithService given wins. A
// name that is not 1 to 128 letters, digits, '_', '-' or '.', or a nil v,
// fails Initialize.
func WithService(name string, v any) Option {
	return func(e *Engine) { e.svc.byName[name] = service{value: v, host: true} }
}

// Service returns the service called name: the host's from New on, a
// plugin's once Initialize has run. Of one name, the host's is used over a
// plugin's and a later plugin's over an earlier one's, as Status.Warnings
// says. ServiceAs also checks the service's type.
func (e *Engine) Service(name string) (any, bool) {
	e.svc.mu.RLock()
	defer e.svc.mu.RUnlock()
	s, ok := e.svc.byName[name]
	return s.value, ok
}

// ServiceAs returns the service called name as a T (a concrete type or an
// interface it implements). The error matches ErrNoService when there is
// none, and is a *ServiceTypeError when it is not a T.
func ServiceAs[T any](e *Engine, name string) (T, error) {
	var zero T
	v, ok := e.Service(name)
	if !ok {
		return zero, fmt.Errorf("%w: %s", ErrNoService, quoteName(name))
	}
	t, ok := v.(T)
	if !ok {
		return zero, &ServiceTypeError{Name: name, Want: reflect.TypeFor[T]().String(), Got: fmt.Sprintf("%T", v)}
	}
	return t, nil
}

// checkServices refuses services no code could look up reliably or use,
// one error each: a name that is not as a tool's must be (it is printed in
// warnings and by morph plugin status), a nil value (a lookup could not
// tell it from a missing one).
func checkServices(svcs map[string]any) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(svcs)) {
		switch {
		case !toolNameRE.MatchString(name):
			errs = append(errs, fmt.Errorf("service name %s: want 1 to 128 letters, digits, '_', '-' or '.'", quoteName(name)))
		case svcs[name] == nil:
			errs = append(errs, fmt.Errorf("service %s is nil", quoteName(name)))
		}
	}
	return errs
}

// hostServices are the services WithService gave, for checkServices.
func (e *Engine) hostServices() map[string]any {
	e.svc.mu.RLock()
	defer e.svc.mu.RUnlock()
	out := map[string]any{}
	for name, s := range e.svc.byName {
		if s.host {
			out[name] = s.value
		}
	}
	return out
}

// addServices registers a plugin's services, in the order of their names:
// the host's of a name is kept, an earlier plugin's replaced, each time
// with a warning naming both.
func (e *Engine) addServices(ctx context.Context, plugin string, svcs map[string]any) {
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(svcs)) {
		switch prev, taken := e.svc.byName[name]; {
		case taken && prev.host:
			e.initWarning(ctx, fmt.Sprintf("the service %q of plugin %q is not used: the host's service of that name is", name, plugin))
			continue
		case taken:
			e.initWarning(ctx, fmt.Sprintf("the service %q of plugin %q replaces plugin %q's", name, plugin, prev.owner))
		}
		e.svc.byName[name] = service{value: svcs[name], owner: plugin}
	}
}

// servicesOf names the services of plugin in use (not replaced), sorted.
func (e *Engine) servicesOf(plugin string) []string {
	e.svc.mu.RLock()
	defer e.svc.mu.RUnlock()
	var names []string
	for name, s := range e.svc.byName {
		if !s.host && s.owner == plugin {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
