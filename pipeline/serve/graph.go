package serve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"

	"github.com/morphhost/morph/internal/renderproc"
	"github.com/morphhost/morph/internal/safetext"
	"github.com/morphhost/morph/pipeline"
)

// graph is the run's drawing (SVG, by morph-render: its statuses, visits
// and the edges taken, as morph pipeline render draws it), or with
// ?format=dot its pipeline source. A drawing runs at most RenderTimeout
// (504 past it), MaxRenders at once (429 past it, counted); without a
// morph-render it is 503, naming ?format=dot.
func (s *Server) graph(w http.ResponseWriter, r *http.Request, run *run) {
	switch f := r.URL.Query().Get("format"); f {
	case "dot":
		s.serveFile(w, r, run, pipeline.SourceFile, "text/vnd.graphviz; charset=utf-8")
		return
	case "", "svg":
	default:
		writeError(w, http.StatusBadRequest, fmt.Errorf("format %q: give svg (the default) or dot", safetext.Line(f, 40)))
		return
	}
	select {
	case s.renders <- struct{}{}:
		defer func() { <-s.renders }()
	default:
		s.rendersRefused.Add(1)
		writeError(w, http.StatusTooManyRequests, fmt.Errorf("%d drawings are running: try again", s.opts.MaxRenders))
		return
	}
	prog := s.opts.RenderProgram
	if prog == "" {
		var err error
		if prog, err = renderproc.Find(); err != nil {
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%w (?format=dot gives the source)", err))
			return
		}
	}
	_, g, err := pipeline.ReadDOTFile(filepath.Join(run.dir, pipeline.SourceFile))
	if err != nil {
		writeError(w, http.StatusNotFound, errors.New("the run has no readable pipeline source"))
		return
	}
	cp, err := pipeline.LoadCheckpoint(run.dir)
	if errors.Is(err, fs.ErrNotExist) {
		cp = nil // not started: the graph alone
	} else if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("the run's checkpoint: %w", err))
		return
	}
	req, err := renderproc.GraphRequest(g, cp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	req.Timeout = s.opts.RenderTimeout
	svg, err := renderproc.Run(r.Context(), prog, req)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, err)
		return
	case err != nil:
		writeError(w, http.StatusBadGateway, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("X-Content-Type-Options", "nosniff")
	// The drawing is a picture: no script of a label runs, nothing loads.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Write(svg)
}
