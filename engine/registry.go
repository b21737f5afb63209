package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine/internal/schemacost"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/internal/schemaerr"
)

// Tool is something the model can call. ParameterSchema returns the JSON
// Schema of the params object; the engine validates every call against it
// before Execute, so Execute may trust its input's shape.
type Tool interface {
	Name() string
	Description() string
	ParameterSchema() string
	Execute(ctx context.Context, params map[string]any) (string, error)
}

// ImageTool is a Tool whose results may carry images (an MCP plugin's
// image content). The engine calls ExecuteImages in place of Execute, and
// sends the images to the model with the observation when the model takes
// images (WithImages); the text should say what they show, since a model
// that does not take them sees the text only.
type ImageTool interface {
	Tool
	ExecuteImages(ctx context.Context, params map[string]any) (string, []abi.Image, error)
}

// ResultTool is a Tool whose results may carry more than text: images, and
// content and a structured result an MCP client gets (abi.ToolCallOutput).
// The engine calls ExecuteResult in place of ExecuteImages and Execute;
// the model gets Output, and the images as ImageTool's.
type ResultTool interface {
	Tool
	ExecuteResult(ctx context.Context, params map[string]any) (abi.ToolCallOutput, error)
}

// anyObject is the schema assumed for a tool that declares none.
const anyObject = `{"type":"object"}`

// ErrInvalidParams marks a tool call whose params do not satisfy the tool's
// schema. The error text names each offending field.
var ErrInvalidParams = errors.New("invalid tool parameters")

// ErrInvalidSchema marks a tool whose ParameterSchema is not a usable JSON Schema.
var ErrInvalidSchema = errors.New("invalid tool parameter schema")

// Registry holds the tools of an engine. It is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	tools  map[string]*registered
	limits SchemaLimits
}

type registered struct {
	tool   Tool
	source string // SourceHost, SourceBuiltin, or "plugin:<name>"
	limits SchemaLimits
	once   sync.Once // schemas compile on first use: registering stays cheap and infallible
	schema *schemacost.Schema
	err    error
}

// NewRegistry returns an empty registry with the default SchemaLimits.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]*registered{}, limits: SchemaLimits{}.withDefaults()}
}

// SetSchemaLimits sets the limits tool schemas are compiled and checked
// with; schemas already compiled are compiled again under them.
func (r *Registry) SetSchemaLimits(l SchemaLimits) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits = l.withDefaults()
	for name, e := range r.tools {
		r.tools[name] = &registered{tool: e.tool, source: e.source, limits: r.limits}
	}
}

// Tool sources, in rising precedence: a built-in tool gives way to a plugin
// tool of the same name, which gives way to a tool the embedding host
// registered.
const (
	SourceBuiltin = "builtin"
	SourceHost    = "host"
)

// PluginSource is the source of the tools of the plugin called name.
func PluginSource(name string) string { return "plugin:" + name }

// Register adds t as a tool of the embedding host, replacing any tool of the
// same name.
func (r *Registry) Register(t Tool) { r.RegisterFrom(SourceHost, t) }

// RegisterFrom adds t from source, replacing any tool of the same name.
func (r *Registry) RegisterFrom(source string, t Tool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools[t.Name()] = &registered{tool: t, source: source, limits: r.limits}
}

// checkTool checks t's name and description and compiles its schema under
// the registry's limits, without registering t, so that a plugin's tools
// are checked as it is loaded. It returns t's entry, its schema compiled,
// for registerChecked.
func (r *Registry) checkTool(t Tool) (*registered, error) {
	r.mu.RLock()
	l := r.limits
	r.mu.RUnlock()
	sch, err := checkSpec(t.Name(), t.Description(), schemaText(t), l)
	if err != nil {
		return nil, err
	}
	e := &registered{tool: t, limits: l}
	e.once.Do(func() { e.schema = sch })
	return e, nil
}

// CheckToolSpec checks a tool as Initialize checks a plugin's: its name, its
// description's length and its parameters schema (JSON text; empty: any
// object) compiled under l, whose zero fields take the defaults. It is the
// one check of a tool: `morph plugin check` and `plugin test` call it too,
// so that they refuse what a run refuses, in the same words. The error wraps
// ErrInvalidTool or ErrInvalidSchema and names the tool.
func CheckToolSpec(name, description, schema string, l SchemaLimits) error {
	if strings.TrimSpace(schema) == "" {
		schema = anyObject
	}
	_, err := checkSpec(name, description, schema, l.withDefaults())
	return err
}

// checkSpec is CheckToolSpec under l, which has its defaults, with the
// schema compiled.
func checkSpec(name, description, schema string, l SchemaLimits) (*schemacost.Schema, error) {
	if err := CheckToolName(name); err != nil {
		return nil, err
	}
	if n := len(description); n > l.MaxDescriptionBytes {
		return nil, fmt.Errorf("%w: tool %s: its description is %d bytes, over the limit of %d (tools.max_description_kb)",
			ErrInvalidTool, quoteName(name), n, l.MaxDescriptionBytes)
	}
	return compileSchema(name, schema, l)
}

// CheckTool checks t as Initialize checks a plugin's tool, without
// registering it: its name, its description's length and its schema under
// the registry's limits. A host that takes tools from an untrusted source
// (an MCP server's list) leaves out the ones that fail, rather than fail
// the whole source.
func (r *Registry) CheckTool(t Tool) error {
	_, err := r.checkTool(t)
	return err
}

// registerChecked adds the tool of e, an entry checkTool returned, from
// source: with its compiled schema, unless the limits changed since.
func (r *Registry) registerChecked(source string, e *registered) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.limits != r.limits {
		e = &registered{tool: e.tool, limits: r.limits}
	}
	e.source = source
	r.tools[e.tool.Name()] = e
}

// replaceFrom makes entries, each checked by checkTool, the tools of
// source, removing the others it had. A name another source has keeps
// that source's tool, and is returned: a list that changes while the
// engine runs cannot take another's tool (and later drop it for good).
func (r *Registry) replaceFrom(source string, entries []*registered) (kept []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, e := range r.tools {
		if e.source == source {
			delete(r.tools, name)
		}
	}
	for _, e := range entries {
		if _, ok := r.tools[e.tool.Name()]; ok {
			kept = append(kept, e.tool.Name())
			continue
		}
		if e.limits != r.limits {
			e = &registered{tool: e.tool, limits: r.limits}
		}
		e.source = source
		r.tools[e.tool.Name()] = e
	}
	return kept
}

// ErrInvalidTool marks a tool whose name or description the engine refuses.
var ErrInvalidTool = errors.New("invalid tool")

// toolNameRE is what a tool's name may be: what a model can type back
// exactly, and a person read (the Model Context Protocol's advice for tool
// names).
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// CheckToolName reports whether name can name a tool: 1 to 128 ASCII
// letters, digits, '_', '-' or '.'. A name with spaces, control characters
// or look-alike letters could not be called reliably, and could forge lines
// wherever tools are listed.
func CheckToolName(name string) error {
	if !toolNameRE.MatchString(name) {
		return fmt.Errorf("%w: tool name %s: want 1 to 128 letters, digits, '_', '-' or '.'", ErrInvalidTool, quoteName(name))
	}
	return nil
}

// maxNameBytes caps a name that a plugin or a model wrote (a tool's, a
// required plugin's) where an error or a message repeats it: a name of a
// megabyte would make one of megabytes, on a terminal and in the log.
const maxNameBytes = 160

// cutName is name cut to maxNameBytes, with a note of what was left out.
func cutName(name string) string { return safetext.Truncate(name, maxNameBytes) }

// quoteName is name cut as cutName does, then quoted as %q does.
func quoteName(name string) string { return safetext.Quote(name, maxNameBytes) }

// Source returns where the tool called name came from.
func (r *Registry) Source(name string) (string, bool) {
	e, ok := r.entry(name)
	if !ok {
		return "", false
	}
	return e.source, true
}

// Get returns the tool called name.
func (r *Registry) Get(name string) (Tool, bool) {
	e, ok := r.entry(name)
	if !ok {
		return nil, false
	}
	return e.tool, true
}

// All returns every tool, sorted by name.
func (r *Registry) All() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Tool, 0, len(r.tools))
	for _, e := range r.tools {
		out = append(out, e.tool)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Names returns the tool names, sorted.
func (r *Registry) Names() []string {
	tools := r.All()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name()
	}
	return names
}

// Specs describes every tool on the wire, sorted by name.
func (r *Registry) Specs() []abi.ToolSpec {
	tools := r.All()
	specs := make([]abi.ToolSpec, len(tools))
	for i, t := range tools {
		specs[i] = abi.ToolSpec{Name: t.Name(), Description: t.Description(), Parameters: json.RawMessage(schemaText(t))}
	}
	return specs
}

// Check compiles every tool's schema and returns the failures joined, each
// wrapping ErrInvalidSchema. Hosts call it at start-up to fail early.
func (r *Registry) Check() error {
	var errs []error
	for _, name := range r.Names() {
		if e, ok := r.entry(name); ok {
			if _, err := e.compiled(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Validate checks params against the schema of the tool called name. The
// error wraps ErrInvalidParams or ErrInvalidSchema and names the bad fields;
// parameters nested deeper than SchemaLimits.MaxParamsDepth, or whose
// validation would take more than SchemaLimits.MaxSteps, are refused
// unchecked.
func (r *Registry) Validate(name string, params map[string]any) error {
	e, ok := r.entry(name)
	if !ok {
		return fmt.Errorf("tool %s is not registered", quoteName(name))
	}
	sch, err := e.compiled()
	if err != nil {
		return err
	}
	// Round-trip through JSON so Go values (ints, structs) validate exactly as
	// the model's JSON would.
	raw, err := marshalBounded(params, e.limits.MaxParamsDepth)
	if err != nil {
		return fmt.Errorf("%w for tool %s: %v", ErrInvalidParams, quoteName(name), err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%w for tool %s: %v", ErrInvalidParams, quoteName(name), err)
	}
	if err := sch.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w for tool %s: %s", ErrInvalidParams, quoteName(name), schemaerr.Describe(ve, ""))
		}
		return fmt.Errorf("%w for tool %s: %v", ErrInvalidParams, quoteName(name), err)
	}
	return nil
}

func (r *Registry) entry(name string) (*registered, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	return e, ok
}

func (e *registered) compiled() (*schemacost.Schema, error) {
	e.once.Do(func() { e.schema, e.err = compileSchema(e.tool.Name(), schemaText(e.tool), e.limits) })
	return e.schema, e.err
}

func schemaText(t Tool) string {
	if s := strings.TrimSpace(t.ParameterSchema()); s != "" {
		return s
	}
	return anyObject
}
