package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// phaseReport is what a phase measured.
type phaseReport struct {
	name        string
	chaos       bool // it killed workers and the server
	start       time.Time
	wall        time.Duration
	turns       []turnResult
	workerKills []time.Time
	serverKills []serverKill
}

// callStats are the model calls of a phase's turns, from the model
// server's log.
type callStats struct {
	arrived, answered, aborted int
	// repeatedKeys are the calls answered more than once (a finished call
	// made again); repeatedTurns the turns they belong to; extra the
	// answers beyond each key's first.
	repeatedKeys, repeatedTurns, extra int
	// finalsAnswered counts the turns whose last call (the final) the
	// model answered: the workflow's view, whatever its client saw.
	finalsAnswered int
	// remade is, for each call lost with its worker and made again, the
	// time from its abort (in flight) or its answer (not yet recorded) to
	// its next arrival.
	remade []time.Duration
}

// modelCalls sums the events of the turns whose id starts with prefix;
// steps is the turns' tool calls (the final is the call after them).
func modelCalls(events []callEvent, prefix string, steps int) callStats {
	var s callStats
	finals := map[string]bool{}
	byKey := map[string][]callEvent{}
	for _, ev := range events {
		if !strings.HasPrefix(ev.Turn, prefix) {
			continue
		}
		byKey[ev.Key] = append(byKey[ev.Key], ev)
		switch ev.Event {
		case eventArrived:
			s.arrived++
		case eventAnswered:
			s.answered++
			if ev.Step == steps {
				finals[ev.Turn] = true
			}
		case eventAborted:
			s.aborted++
		}
	}
	s.finalsAnswered = len(finals)
	turns := map[string]bool{}
	for _, evs := range byKey {
		answers := 0
		for i, ev := range evs {
			if ev.Event == eventArrived {
				continue
			}
			if ev.Event == eventAnswered {
				answers++
			}
			if j := slices.IndexFunc(evs[i+1:], func(e callEvent) bool { return e.Event == eventArrived }); j >= 0 {
				s.remade = append(s.remade, evs[i+1+j].Time.Sub(ev.Time))
			}
		}
		if answers > 1 {
			s.repeatedKeys++
			s.extra += answers - 1
			turns[evs[0].Turn] = true
		}
	}
	s.repeatedTurns = len(turns)
	return s
}

// ledgerStats are the ledger's lines of a phase's turns.
type ledgerStats struct {
	lines, repeated, extra, missing int
}

// ledger reads the ledger's lines of the turns whose id starts with
// prefix; a turn that ended with a final must have its steps' lines.
func ledger(path, prefix string, finals []string, steps int) (ledgerStats, error) {
	var s ledgerStats
	count := map[string]int{}
	f, err := os.Open(path)
	if err != nil && !os.IsNotExist(err) {
		return s, err
	}
	if f != nil {
		defer f.Close()
		for sc := bufio.NewScanner(f); sc.Scan(); {
			if line := sc.Text(); strings.HasPrefix(line, prefix) {
				count[line]++
				s.lines++
			}
		}
	}
	for _, n := range count {
		if n > 1 {
			s.repeated++
			s.extra += n - 1
		}
	}
	for _, id := range finals {
		for step := range steps {
			if count[ledgerLine(id, step)] == 0 {
				s.missing++
			}
		}
	}
	return s, nil
}

func sortDurations(ds []time.Duration) { sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] }) }

// percentile is the nearest-rank p-th percentile of ds (sorted here); 0
// for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	sortDurations(ds)
	i := int(float64(len(ds))*p/100+0.999999) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// spread is "p50 / p90 / max" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s / %s (%d)", secs(percentile(ds, 50)), secs(percentile(ds, 90)), secs(percentile(ds, 100)), len(ds))
}

// report is the phases' figures as Markdown.
func (h *harness) report(phases []*phaseReport) string {
	var b strings.Builder
	events := h.model.events()
	fmt.Fprintf(&b, "## morph-chaos report\n\n%d sessions of one turn per phase (%d ledger tool calls and a final each, the model answering in %s), %d workers, seed %d; work directory %s\n\n",
		h.o.sessions, h.o.steps, h.o.latency, h.o.workers, h.o.seed, h.o.work)
	b.WriteString("| | " + strings.Join(names(phases), " | ") + " |\n|---|" + strings.Repeat("---|", len(phases)) + "\n")
	row := func(label string, f func(p *phaseReport) string) {
		cells := []string{label}
		for _, p := range phases {
			cells = append(cells, f(p))
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	stats := map[*phaseReport]callStats{}
	ledgers := map[*phaseReport]ledgerStats{}
	var ledgerErr error
	for _, p := range phases {
		stats[p] = modelCalls(events, p.name+"-", h.o.steps)
		var finals []string
		for _, t := range p.turns {
			if t.final {
				finals = append(finals, t.id)
			}
		}
		l, err := ledger(h.ledger, p.name+"-", finals, h.o.steps)
		ledgers[p], ledgerErr = l, err
	}
	row("turns ended with a final", func(p *phaseReport) string {
		finals, failed, cut := 0, 0, 0
		for _, t := range p.turns {
			switch {
			case t.final:
				finals++
			case t.ended:
				failed++
			default:
				cut++
			}
		}
		return fmt.Sprintf("%d of %d (%d failed, %d still running at the bound)", finals, len(p.turns), failed, cut)
	})
	row("turns whose final the model answered (the workflows' view)", func(p *phaseReport) string { return fmt.Sprint(stats[p].finalsAnswered) })
	row("turn time of the finals, p50 / p90 / max", func(p *phaseReport) string {
		var ds []time.Duration
		for _, t := range p.turns {
			if t.final {
				ds = append(ds, t.took)
			}
		}
		return spread(ds)
	})
	row("phase wall time", func(p *phaseReport) string { return secs(p.wall) })
	row("model calls arrived / answered / aborted", func(p *phaseReport) string {
		s := stats[p]
		return fmt.Sprintf("%d / %d / %d", s.arrived, s.answered, s.aborted)
	})
	row("**finished model calls made again** (calls, extra answers, turns)", func(p *phaseReport) string {
		s := stats[p]
		return fmt.Sprintf("%d, %d, %d", s.repeatedKeys, s.extra, s.repeatedTurns)
	})
	row("ledger lines / **repeated** (lines, extra) / missing from a final's turn", func(p *phaseReport) string {
		l := ledgers[p]
		return fmt.Sprintf("%d / %d, %d / %d", l.lines, l.repeated, l.extra, l.missing)
	})
	row("worker kills (SIGKILL)", func(p *phaseReport) string { return fmt.Sprint(len(p.workerKills)) })
	row("a call lost with its worker (in flight, or answered and not recorded), made again after: p50 / p90 / max (calls)", func(p *phaseReport) string { return spread(stats[p].remade) })
	row("server kills: down for; first model call after it answered again", func(p *phaseReport) string {
		var parts []string
		for _, k := range p.serverKills {
			if k.err != nil {
				parts = append(parts, "did not come back: "+k.err.Error())
				continue
			}
			first := "none"
			for _, ev := range events {
				if ev.Event == eventArrived && ev.Time.After(k.up) && strings.HasPrefix(ev.Turn, p.name+"-") {
					first = secs(ev.Time.Sub(k.up))
					break
				}
			}
			parts = append(parts, fmt.Sprintf("%s; %s", secs(k.up.Sub(k.killed)), first))
		}
		if !p.chaos || h.o.serverKills == 0 {
			return "-"
		}
		if len(parts) < h.o.serverKills {
			parts = append(parts, fmt.Sprintf("%d of %d not made: the turns ended first", h.o.serverKills-len(parts), h.o.serverKills))
		}
		return strings.Join(parts, "<br>")
	})
	if ledgerErr != nil {
		fmt.Fprintf(&b, "\nthe ledger could not be read: %v\n", ledgerErr)
	}
	return b.String()
}

func names(phases []*phaseReport) []string {
	var out []string
	for _, p := range phases {
		out = append(out, p.name)
	}
	return out
}
