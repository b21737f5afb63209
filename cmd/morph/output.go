package main

// Everything a plugin or a model wrote reaches the terminal through these:
// manifests, tool names, error texts, replies. Such text can carry escape
// sequences that rewrite the screen, bidirectional overrides that make a
// line read differently from its bytes, and line breaks that forge lines of
// a report.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/internal/safetext"
)

// maxLabelBytes bounds a label: no name needs more, and a longer one would
// flood the report it is in.
const maxLabelBytes = 256

// label is a short string a plugin or a model chose (a plugin's name or
// version, a tool, hook, capability or export name, a fixture key) as one
// line of at most maxLabelBytes, its control characters escaped.
func label(s string) string { return safetext.Line(s, maxLabelBytes) }

// labels is the labels of list joined with ", ", or "(none)".
func labels(list []string) string {
	if len(list) == 0 {
		return "(none)"
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = label(s)
	}
	return strings.Join(out, ", ")
}

// moduleName is a plugin's name and version as a report shows them:
// "name version", or the name alone when the manifest gives no version.
func moduleName(name, version string) string {
	if version == "" {
		return label(name)
	}
	return label(name) + " " + label(version)
}

// moduleKind is what a module is written to: "ABI v1" for a morph module,
// "Extism plugin" for one the Extism loader runs, whose ABI version is the
// host's (it has no morph manifest).
func moduleKind(abiVersion int, loader string) string {
	if loader == host.LoaderExtism {
		return "Extism plugin"
	}
	return fmt.Sprintf("ABI v%d", abiVersion)
}

// moduleTitle is moduleName and moduleKind: "count 0.1.0, ABI v1".
func moduleTitle(name, version string, abiVersion int, loader string) string {
	return moduleName(name, version) + ", " + moduleKind(abiVersion, loader)
}

// oneLine is prose a plugin or a model may have written (an error, a
// warning, a description) as one line of at most max bytes (0: no limit):
// each run of whitespace, line breaks included, becomes one space, and
// what is left that a terminal would act on is escaped.
func oneLine(s string, max int) string {
	return safetext.Line(strings.Join(strings.Fields(s), " "), max)
}

// maxErrorLine caps each line errorLines makes: a plugin's error text or
// a name it chose can be megabytes, and a terminal or a log should not
// get them.
const maxErrorLine = 4 << 10

// errorLines are the lines "morph: ..." prints for err: one for each error
// joined with errors.Join (all the mistakes of a config file), each as
// oneLine of at most maxErrorLine bytes. The lines follow the errors'
// structure, never the newlines in their text, which a plugin or a model
// may have written.
func errorLines(err error) []string {
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		errs := u.Unwrap()
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		if strings.Join(msgs, "\n") == err.Error() { // errors.Join's text: one per line
			var lines []string
			for _, e := range errs {
				lines = append(lines, errorLines(e)...)
			}
			return lines
		}
	case interface{ Unwrap() error }:
		// A wrapper that adds nothing (exitError) around joined errors.
		if inner := u.Unwrap(); inner != nil && inner.Error() == err.Error() {
			return errorLines(inner)
		}
	}
	return []string{oneLine(err.Error(), maxErrorLine)}
}

// joinLines is errors.Join of one error per line.
func joinLines(lines ...string) error {
	errs := make([]error, len(lines))
	for i, l := range lines {
		errs[i] = errors.New(l)
	}
	return errors.Join(errs...)
}

// writeJSON writes v as indented JSON that is safe on a terminal.
// encoding/json escapes C0 controls, but writes C1 controls (U+009B, CSI),
// bidirectional overrides and invisible characters as they are: those
// (safetext.Unsafe), and DEL, are written as \uXXXX escapes (a surrogate
// pair beyond the BMP, as a tag character is), and a byte that is not
// UTF-8 (a json.RawMessage may hold one) as \ufffd, which is how a decoder
// reads it. The JSON stays valid and decodes to the same value.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	out := buf.String()
	if safetext.Escape(out) == out { // the common case: nothing to escape
		_, err := io.WriteString(w, out)
		return err
	}
	var b strings.Builder
	b.Grow(len(out) + 64)
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r >= 0x7f && safetext.Unsafe(r): // C0 controls, tab and newline are the encoder's
			if hi, lo := utf16.EncodeRune(r); hi != utf8.RuneError {
				fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(out[i : i+size])
		}
		i += size
	}
	_, err := io.WriteString(w, b.String())
	return err
}
