package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/morphhost/morph/internal/suggest"
)

// ConfigType is the type of a config key's values.
type ConfigType string

// The types a config key may have: what a setting needs, and what a
// command line or a manifest can state.
const (
	ConfigString   ConfigType = "string"   // a Go string (or a type of kind string, such as Mode)
	ConfigInt      ConfigType = "int"      // any Go integer that fits an int, held as an int
	ConfigFloat    ConfigType = "float"    // a Go float or integer, held as a float64
	ConfigBool     ConfigType = "bool"     // a Go bool
	ConfigDuration ConfigType = "duration" // a time.Duration
)

// ConfigKey declares one setting of the engine's config (Engine.Config):
// what may change while the engine lives, such as its Mode, or what a
// plugin lets the host tune. Keys are typed so that a mistyped name or a
// value of the wrong type fails where it is set, not where it is read.
type ConfigKey struct {
	Name    string // 1 to 128 letters, digits, '_', '-' or '.', as a tool's
	Type    ConfigType
	Default any      // nil: the type's zero value, or a string key's first Value
	Doc     string   // what the setting does, for whoever lists the keys (ConfigKeys)
	Values  []string // the values a string key may take; nil: any
}

// UnknownConfigKeyError is the error of Config and SetConfig for a key
// nobody declared; it names the known keys nearest to it, since the key
// is most likely mistyped.
type UnknownConfigKeyError struct {
	Key     string
	Closest []string // at most three known keys, nearest first
}

// Error names the key and the nearest known ones.
func (e *UnknownConfigKeyError) Error() string {
	msg := "engine: unknown config key " + quoteName(e.Key)
	if len(e.Closest) > 0 {
		msg += "; the nearest known keys: " + quoteNames(e.Closest)
	}
	return msg
}

// ConfigValueError is the error of a value a config key does not take: of
// another type than the key's, or a string that is not one of its Values.
type ConfigValueError struct {
	Key  string
	Want string // the key's type, or "one of" its values
	Got  string // the value's Go type, or the value quoted
}

// Error reads "engine: config key \"k\": want int, got string".
func (e *ConfigValueError) Error() string {
	return fmt.Sprintf("engine: config key %s: want %s, got %s", quoteName(e.Key), e.Want, e.Got)
}

// settings are the engine's config: its keys with their values. They
// have their own lock, not the lifecycle's, so that runs and Initialize
// may read them while the other goes on.
type settings struct {
	mu       sync.RWMutex
	keys     map[string]*setting
	hostErrs []error // WithConfigKeys' keys that could not be declared, for Initialize
}

type setting struct {
	key   ConfigKey
	from  string // sourceEngine, SourceHost, or PluginSource of the plugin that declared it
	value any
}

// sourceEngine is the source of the engine's own config keys (ConfigMode).
const sourceEngine = "engine"

// WithConfigKeys declares config keys of the host's. Of one name, the
// host's key is used over a plugin's (see Precedence in the package doc)
// and the last declared wins. A key that cannot be declared (a bad name,
// an unknown type, a default of another type, the name of one of the
// engine's keys such as ConfigMode) fails Initialize.
func WithConfigKeys(keys ...ConfigKey) Option {
	return func(e *Engine) {
		for _, k := range keys {
			k, err := checkKey(k)
			if err == nil && e.conf.from(k.Name) == sourceEngine {
				err = fmt.Errorf("config key %s is the engine's own", quoteName(k.Name))
			}
			if err != nil {
				e.conf.hostErrs = append(e.conf.hostErrs, fmt.Errorf("host %w", err))
				continue
			}
			e.conf.put(k, SourceHost)
		}
	}
}

// Config returns the value of key: its default until SetConfig sets it,
// of the Go type its ConfigType names. A key no one declared is an
// *UnknownConfigKeyError; a plugin's keys are declared by Initialize.
func (e *Engine) Config(key string) (any, error) {
	e.conf.mu.RLock()
	defer e.conf.mu.RUnlock()
	s, ok := e.conf.keys[key]
	if !ok {
		return nil, e.conf.unknown(key)
	}
	return s.value, nil
}

// SetConfig sets key to value, which takes effect at once, in runs in
// progress too. A key no one declared is an *UnknownConfigKeyError, a
// value the key does not take a *ConfigValueError.
func (e *Engine) SetConfig(key string, value any) error {
	e.conf.mu.Lock()
	defer e.conf.mu.Unlock()
	s, ok := e.conf.keys[key]
	if !ok {
		return e.conf.unknown(key)
	}
	v, err := s.key.coerce(value)
	if err != nil {
		return err
	}
	s.value = v
	return nil
}

// ConfigKeys lists the declared keys, sorted by name: what a command line
// or a UI offers to set.
func (e *Engine) ConfigKeys() []ConfigKey {
	e.conf.mu.RLock()
	defer e.conf.mu.RUnlock()
	keys := make([]ConfigKey, 0, len(e.conf.keys))
	for _, s := range e.conf.keys {
		k := s.key
		k.Values = slices.Clone(k.Values)
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ConfigKey) int { return strings.Compare(a.Name, b.Name) })
	return keys
}

// checkKey returns k with its default in the form the key holds, or why
// k cannot be declared.
func checkKey(k ConfigKey) (ConfigKey, error) {
	switch k.Type {
	case ConfigString, ConfigInt, ConfigFloat, ConfigBool, ConfigDuration:
	default:
		return k, fmt.Errorf("config key %s: unknown type %s", quoteName(k.Name), quoteName(string(k.Type)))
	}
	if !toolNameRE.MatchString(k.Name) {
		return k, fmt.Errorf("config key name %s: want 1 to 128 letters, digits, '_', '-' or '.'", quoteName(k.Name))
	}
	if k.Values != nil && k.Type != ConfigString {
		return k, fmt.Errorf("config key %s: only a string key has Values", quoteName(k.Name))
	}
	def := k.Default
	switch {
	case def != nil:
	case len(k.Values) > 0:
		def = k.Values[0]
	default:
		def = reflect.Zero(configTypes[k.Type]).Interface()
	}
	v, err := k.coerce(def)
	var ve *ConfigValueError
	if errors.As(err, &ve) {
		return k, fmt.Errorf("config key %s: its default: want %s, got %s", quoteName(k.Name), ve.Want, ve.Got)
	}
	k.Default, k.Values = v, slices.Clone(k.Values)
	return k, nil
}

// checkKeys checks a plugin's keys as checkKey does, and that it declares
// none twice; it returns those that can be declared and an error for each
// that cannot.
func checkKeys(keys []ConfigKey) ([]ConfigKey, []error) {
	var ok []ConfigKey
	var errs []error
	seen := map[string]bool{}
	for _, k := range keys {
		checked, err := checkKey(k)
		if err == nil && seen[k.Name] {
			err = fmt.Errorf("config key %s is declared twice", quoteName(k.Name))
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seen[k.Name] = true
		ok = append(ok, checked)
	}
	return ok, errs
}

// configTypes are the Go types a key's values are held as.
var configTypes = map[ConfigType]reflect.Type{
	ConfigString: reflect.TypeFor[string](), ConfigInt: reflect.TypeFor[int](), ConfigFloat: reflect.TypeFor[float64](),
	ConfigBool: reflect.TypeFor[bool](), ConfigDuration: reflect.TypeFor[time.Duration](),
}

// coerce returns v as key k holds it (see the ConfigType constants), or a
// *ConfigValueError.
func (k ConfigKey) coerce(v any) (any, error) {
	rv := reflect.ValueOf(v)
	_, isDuration := v.(time.Duration)
	switch kind := rv.Kind(); {
	case k.Type == ConfigString && kind == reflect.String:
		s := rv.String()
		if k.Values != nil && !slices.Contains(k.Values, s) {
			return nil, &ConfigValueError{Key: k.Name, Want: "one of " + quoteNames(k.Values), Got: strconv.Quote(s)}
		}
		return s, nil
	case k.Type == ConfigInt && rv.CanInt() && !isDuration && rv.Int() >= math.MinInt && rv.Int() <= math.MaxInt:
		return int(rv.Int()), nil
	case k.Type == ConfigInt && rv.CanUint() && rv.Uint() <= math.MaxInt:
		return int(rv.Uint()), nil
	case k.Type == ConfigFloat && rv.CanFloat():
		return rv.Float(), nil
	case k.Type == ConfigFloat && rv.CanInt() && !isDuration:
		return float64(rv.Int()), nil
	case k.Type == ConfigFloat && rv.CanUint():
		return float64(rv.Uint()), nil
	case k.Type == ConfigBool && kind == reflect.Bool:
		return rv.Bool(), nil
	case k.Type == ConfigDuration && isDuration:
		return v, nil
	}
	return nil, &ConfigValueError{Key: k.Name, Want: string(k.Type), Got: fmt.Sprintf("%T", v)}
}

// put declares k, from a source, replacing any key of its name, with its
// default as its value.
func (c *settings) put(k ConfigKey, from string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[string]*setting{}
	}
	c.keys[k.Name] = &setting{key: k, from: from, value: k.Default}
}

// from is the source of key, or "" when it is not declared.
func (c *settings) from(key string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if s, ok := c.keys[key]; ok {
		return s.from
	}
	return ""
}

// unknown is the error for key, which is not declared; c.mu is held.
func (c *settings) unknown(key string) error {
	names := make([]string, 0, len(c.keys))
	for name := range c.keys {
		names = append(names, name)
	}
	return &UnknownConfigKeyError{Key: key, Closest: suggest.Closest(key, names, 3, suggest.MaxTypo)}
}

// addConfigKeys declares a plugin's keys, checked as it was opened: the
// engine's or the host's key of a name is kept, an earlier plugin's
// replaced, each time with a warning naming both.
func (e *Engine) addConfigKeys(ctx context.Context, plugin string, keys []ConfigKey) {
	for _, k := range keys {
		switch from := e.conf.from(k.Name); from {
		case "":
		case sourceEngine, SourceHost:
			e.initWarning(ctx, fmt.Sprintf("the config key %q of plugin %q is not used: the %s's key of that name is", k.Name, plugin, from))
			continue
		default:
			e.initWarning(ctx, fmt.Sprintf("the config key %q of plugin %q replaces plugin %q's", k.Name, plugin, strings.TrimPrefix(from, "plugin:")))
		}
		e.conf.put(k, PluginSource(plugin))
	}
}

// configKeysOf names the config keys of plugin in use (not replaced), sorted.
func (e *Engine) configKeysOf(plugin string) []string {
	e.conf.mu.RLock()
	defer e.conf.mu.RUnlock()
	var names []string
	for name, s := range e.conf.keys {
		if s.from == PluginSource(plugin) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// quoteNames is names, each as quoteName makes it, joined with ", ".
func quoteNames(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = quoteName(n)
	}
	return strings.Join(quoted, ", ")
}
