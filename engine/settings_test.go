package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostKeys are keys of every type, one with Values.
var hostKeys = []ConfigKey{
	{Name: "retries", Type: ConfigInt, Default: 3, Doc: "how often"},
	{Name: "ratio", Type: ConfigFloat},
	{Name: "verbose", Type: ConfigBool},
	{Name: "timeout", Type: ConfigDuration, Default: time.Second},
	{Name: "style", Type: ConfigString, Values: []string{"terse", "chatty"}},
}

// label is a named string type, as Mode is.
type label string

// Each key holds its type's Go value, from its default on; a value of
// another Go type of the same kind is converted, and any other is refused
// naming the key, the type wanted and the type given.
func TestConfigTypes(t *testing.T) {
	e := New(script(), nil, WithConfigKeys(hostKeys...))
	for key, want := range map[string]any{"retries": 3, "ratio": 0.0, "verbose": false, "timeout": time.Second, "style": "terse"} {
		if got, err := e.Config(key); err != nil || got != want {
			t.Errorf("default of %s = %#v, %v; want %#v", key, got, err, want)
		}
	}
	for _, c := range []struct {
		key      string
		set, got any
	}{
		{"retries", int8(5), 5}, {"retries", uint16(7), 7}, {"ratio", float32(0.5), 0.5}, {"ratio", 2, 2.0},
		{"verbose", true, true}, {"timeout", time.Minute, time.Minute}, {"style", label("chatty"), "chatty"},
	} {
		if err := e.SetConfig(c.key, c.set); err != nil {
			t.Errorf("SetConfig(%s, %#v): %v", c.key, c.set, err)
		} else if got, _ := e.Config(c.key); got != c.got {
			t.Errorf("SetConfig(%s, %#v) holds %#v, want %#v", c.key, c.set, got, c.got)
		}
	}
	for _, c := range []struct {
		key       string
		set       any
		want, got string
	}{
		{"retries", "5", "int", "string"},
		{"retries", 1.5, "int", "float64"},
		{"retries", time.Second, "int", "time.Duration"},
		{"retries", uint64(math.MaxUint64), "int", "uint64"},
		{"ratio", time.Second, "float", "time.Duration"},
		{"verbose", 1, "bool", "int"},
		{"timeout", 5, "duration", "int"},
		{"style", nil, "string", "<nil>"},
		{"style", "loud", `one of "terse", "chatty"`, `"loud"`},
	} {
		err := e.SetConfig(c.key, c.set)
		var ve *ConfigValueError
		if !errors.As(err, &ve) {
			t.Errorf("SetConfig(%s, %#v) = %v, want a *ConfigValueError", c.key, c.set, err)
			continue
		}
		if ve.Key != c.key {
			t.Errorf("SetConfig(%s, %#v): Key = %q, want %q", c.key, c.set, ve.Key, c.key)
		}
		if ve.Want != c.want {
			t.Errorf("SetConfig(%s, %#v): Want = %s, want %s", c.key, c.set, ve.Want, c.want)
		}
		if ve.Got != c.got {
			t.Errorf("SetConfig(%s, %#v): Got = %s, want %s", c.key, c.set, ve.Got, c.got)
		}
	}
	if got, _ := e.Config("style"); got != "chatty" {
		t.Fatalf("a refused value changed the key: %v", got)
	}
	err := e.SetConfig("style", "loud")
	if err.Error() != `engine: config key "style": want one of "terse", "chatty", got "loud"` {
		t.Fatalf("message %q", err)
	}
}

// An unknown key is an error naming it and the known keys nearest it.
func TestUnknownConfigKey(t *testing.T) {
	e := New(script(), nil, WithConfigKeys(hostKeys...))
	for _, err := range []error{e.SetConfig("retires", 1), func() error { _, err := e.Config("retires"); return err }()} {
		var ue *UnknownConfigKeyError
		if !errors.As(err, &ue) {
			t.Fatalf("err = %v, want an *UnknownConfigKeyError", err)
		}
		if ue.Key != "retires" {
			t.Errorf("Key = %q, want retires", ue.Key)
		}
		if !slices.Equal(ue.Closest, []string{"retries"}) {
			t.Errorf("Closest = %q, want retries alone", ue.Closest)
		}
		if err.Error() != `engine: unknown config key "retires"; the nearest known keys: "retries"` {
			t.Fatalf("message %q", err)
		}
	}
	// A key like none of the known ones gets no suggestion.
	var ue *UnknownConfigKeyError
	err := e.SetConfig("foo", 1)
	if !errors.As(err, &ue) {
		t.Fatalf("foo: err = %v, want an *UnknownConfigKeyError", err)
	}
	if len(ue.Closest) != 0 {
		t.Errorf("foo: Closest = %q, want none", ue.Closest)
	}
	if want := `engine: unknown config key "foo"`; err.Error() != want {
		t.Errorf("foo: message %q, want %q", err, want)
	}
}

// A plugin's keys are declared by Initialize, with the precedence of its
// tools: the host's key over a plugin's, a later plugin's over an earlier
// one's, each time with a warning.
func TestPluginConfigKeys(t *testing.T) {
	p1 := &fakePlugin{name: "p1", ext: Extension{ConfigKeys: []ConfigKey{
		{Name: "retries", Type: ConfigString}, {Name: "depth", Type: ConfigInt, Default: 1}, {Name: "own", Type: ConfigBool}}}}
	p2 := &fakePlugin{name: "p2", ext: Extension{ConfigKeys: []ConfigKey{{Name: "depth", Type: ConfigInt, Default: 2}}}}
	e := New(script(), nil, WithExtenders(p1, p2), WithConfigKeys(hostKeys...))
	var ue *UnknownConfigKeyError
	if _, err := e.Config("depth"); !errors.As(err, &ue) {
		t.Fatalf("a plugin's key before Initialize: %v", err)
	}
	if err := e.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{"retries": 3, "depth": 2, "own": false} {
		if got, err := e.Config(key); err != nil || got != want {
			t.Errorf("%s = %#v, %v; want %#v", key, got, err, want)
		}
	}
	st := e.Status()
	if got := fmt.Sprint(st.Plugins[0].ConfigKeys, st.Plugins[1].ConfigKeys); got != "[own] [depth]" {
		t.Errorf("keys in use by p1, p2: %s", got)
	}
	want := []string{
		`the config key "retries" of plugin "p1" is not used: the host's key of that name is`,
		`the config key "depth" of plugin "p2" replaces plugin "p1"'s`,
	}
	if got := strings.Join(st.Warnings, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	keys := e.ConfigKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name
	}
	if !slices.Equal(names, []string{"depth", "mode", "own", "ratio", "retries", "style", "timeout", "verbose"}) || keys[4].Doc != "how often" {
		t.Fatalf("ConfigKeys %v", keys)
	}
	keys[5].Values[0] = "changed"
	if err := e.SetConfig("style", "terse"); err != nil {
		t.Fatalf("changing ConfigKeys' result changed the key: %v", err)
	}
}

// A key that cannot be declared fails initialization, blamed on its plugin
// or on the host.
func TestBadConfigKeysFailInitialize(t *testing.T) {
	for _, c := range []struct {
		key  ConfigKey
		want string
	}{
		{ConfigKey{Name: "two words", Type: ConfigInt}, `config key name "two words"`},
		{ConfigKey{Name: "n", Type: "integer"}, `config key "n": unknown type "integer"`},
		{ConfigKey{Name: "n", Type: ConfigInt, Default: "3"}, `config key "n": its default: want int, got string`},
		{ConfigKey{Name: "n", Type: ConfigInt, Values: []string{"1"}}, `config key "n": only a string key has Values`},
		{ConfigKey{Name: "s", Type: ConfigString, Values: []string{"a"}, Default: "b"}, `config key "s": its default: want one of "a", got "b"`},
	} {
		p := &fakePlugin{name: "p", ext: Extension{ConfigKeys: []ConfigKey{c.key}}}
		err := New(script(), nil, WithExtenders(p)).Initialize(context.Background())
		checkPluginError(t, fmt.Sprintf("%+v", c.key), err, "p", c.want)
		err = New(script(), nil, WithConfigKeys(c.key)).Initialize(context.Background())
		var pe *PluginError
		if !errors.Is(err, ErrInit) {
			t.Errorf("%+v, the host's: err = %v, want ErrInit", c.key, err)
		}
		if errors.As(err, &pe) {
			t.Errorf("%+v, the host's: err = %v, a *PluginError of %q; want the host's", c.key, err, pe.Plugin)
		}
		if err == nil || !strings.Contains(err.Error(), "host "+c.want) {
			t.Errorf("%+v, the host's: err = %v, want it to say %q", c.key, err, "host "+c.want)
		}
	}
	twice := &fakePlugin{name: "p", ext: Extension{ConfigKeys: []ConfigKey{{Name: "n", Type: ConfigInt}, {Name: "n", Type: ConfigBool}}}}
	if err := New(script(), nil, WithExtenders(twice)).Initialize(context.Background()); err == nil || !strings.Contains(err.Error(), `plugin "p": config key "n" is declared twice`) {
		t.Fatalf("err = %v", err)
	}
}

// Config and SetConfig may be called from any goroutine (-race tells).
func TestConfigConcurrent(t *testing.T) {
	e := New(script(), nil, WithConfigKeys(hostKeys...))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 100 {
				if err := e.SetConfig("retries", i*100+j); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				if v, err := e.Config("retries"); err != nil || v.(int) < 0 {
					t.Error(v, err)
				}
			}
		}()
	}
	wg.Wait()
}
