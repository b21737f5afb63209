package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"
)

// JournalFile is the run directory's journal: one JSON line per node the
// run finished since checkpoint.json was last written, fsynced before the
// run goes on. Writing a record costs the same at the 5,000th node as at
// the first; checkpoint.json, the whole state, is rewritten only when the
// journal has grown past it (compaction), so its cost is amortised.
const JournalFile = "journal.jsonl"

// ErrJournalCorrupt is a journal record that is damaged or out of order
// before the journal's last line: the state after it cannot be known.
var ErrJournalCorrupt = errors.New("pipeline: journal corrupt")

// compactFloor is the journal size below which it is never compacted:
// rewriting a small checkpoint after every few records would cost more
// than it saves on a resume.
const compactFloor = 64 << 10

// journalRecord is what one finished node changed in the run's state.
type journalRecord struct {
	Seq     int64    `json:"seq"`
	Node    string   `json:"node"`
	Next    string   `json:"next"`
	Outcome *Outcome `json:"outcome"`
	Visits  int      `json:"visits"`
	// Nodes and Retries are the node results and retry counts touched
	// since the previous record (a parallel node's branches included).
	Nodes           map[string]*NodeResult `json:"nodes,omitempty"`
	Retries         map[string]int         `json:"node_retries,omitempty"`
	GoalGateRetries int                    `json:"goal_gate_retries"`
	Usage           Usage                  `json:"usage"`
	// Context holds the keys set since the previous record, Deleted the
	// keys removed (a key set to null stays apart from a removed one).
	Context map[string]any `json:"context,omitempty"`
	Deleted []string       `json:"deleted,omitempty"`
	Log     []string       `json:"log,omitempty"`
	Elapsed time.Duration  `json:"elapsed_ns"`
	Time    time.Time      `json:"t"`
	// Restart, when not 0, makes this a restart record: the node took a
	// loop_restart edge, and the loop that starts at Next is the run's
	// Restart-th (see newLoop).
	Restart int `json:"restart,omitempty"`
}

// apply folds rec into cp: the one place a record becomes state, for the
// reader's fold and so for every resume.
func (cp *Checkpoint) apply(rec *journalRecord) {
	cp.Completed = append(cp.Completed, rec.Node)
	if cp.Outcomes == nil {
		cp.Outcomes = map[string]*Outcome{}
	}
	cp.Outcomes[rec.Node] = rec.Outcome
	if cp.Visits == nil {
		cp.Visits = map[string]int{}
	}
	cp.Visits[rec.Node] = rec.Visits
	if cp.Nodes == nil {
		cp.Nodes = map[string]*NodeResult{}
	}
	maps.Copy(cp.Nodes, rec.Nodes)
	if cp.RetryCounts == nil {
		cp.RetryCounts = map[string]int{}
	}
	maps.Copy(cp.RetryCounts, rec.Retries)
	if cp.Context == nil {
		cp.Context = map[string]any{}
	}
	maps.Copy(cp.Context, rec.Context)
	for _, k := range rec.Deleted {
		delete(cp.Context, k)
	}
	cp.Log = append(cp.Log, rec.Log...)
	cp.GoalGateRetries, cp.Usage, cp.Elapsed = rec.GoalGateRetries, rec.Usage, rec.Elapsed
	cp.CurrentNode, cp.NextNode, cp.State = rec.Node, rec.Next, RunRunning
	cp.SavedAt, cp.JournalSeq = rec.Time, rec.Seq
	if rec.Restart > 0 {
		cp.newLoop(rec.Restart)
	}
}

// fold applies dir's journal records after cp.JournalSeq to cp and
// returns the size of a torn last line it left out (a crash mid-append:
// that node runs again on resume). Records at or before cp.JournalSeq are
// ones a compaction already holds (a crash between writing checkpoint.json
// and emptying the journal): skipped, never applied twice.
func (cp *Checkpoint) fold(dir string) (torn int, err error) {
	path := filepath.Join(dir, JournalFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	// A crash on some file systems leaves NULs where the last write was.
	end := len(bytes.TrimRight(data, "\x00"))
	next := cp.JournalSeq + 1
	for off, line := 0, 1; off < end; line++ {
		nl := bytes.IndexByte(data[off:end], '\n')
		last := nl < 0 || off+nl+1 >= end
		var text []byte
		if nl < 0 {
			text = data[off:end]
		} else {
			text = data[off : off+nl]
		}
		var rec journalRecord
		if nl < 0 || json.Unmarshal(text, &rec) != nil || rec.Node == "" {
			if last {
				return len(data) - off, nil
			}
			return 0, fmt.Errorf("%w: %s:%d is not a record, and records follow it: the state after it is unknown (move %s aside to resume from %s alone, which runs again the stages after line %d)",
				ErrJournalCorrupt, path, line, JournalFile, CheckpointFile, line-1)
		}
		off += nl + 1
		if rec.Seq <= cp.JournalSeq {
			continue
		}
		if rec.Seq != next {
			return 0, fmt.Errorf("%w: %s:%d has record %d where %d was due (move %s aside to resume from %s alone, which runs again the stages after line %d)",
				ErrJournalCorrupt, path, line, rec.Seq, next, JournalFile, CheckpointFile, line-1)
		}
		cp.apply(&rec)
		next++
	}
	return 0, nil
}

// journal is the open journal of a run in progress.
type journal struct {
	f   *os.File
	seq int64
	// size is the journal's bytes since the last compaction, cpSize the
	// size of the checkpoint that compaction wrote.
	size, cpSize int64
	buf          []byte // the last record's, reused
}

// openJournal opens (creating) dir's journal for appending after seq.
func openJournal(dir string, seq int64) (*journal, error) {
	f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &journal{f: f, seq: seq}, nil
}

// append writes rec as one line with one write and syncs it.
func (j *journal) append(rec *journalRecord) error {
	rec.Seq = j.seq + 1
	b, err := rec.appendJSON(j.buf[:0])
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	b = append(b, '\n')
	j.buf = b
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.seq = rec.Seq
	j.size += int64(len(b))
	return nil
}

// due says whether the journal has grown past the checkpoint: compacting
// then costs no more than the records written since the last one.
func (j *journal) due() bool { return j.size > max(j.cpSize, compactFloor) }

// reset empties the journal after a compaction that wrote cpSize bytes.
func (j *journal) reset(cpSize int) error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.size, j.cpSize = 0, int64(cpSize)
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// appendRecord writes the journal record of node cur, which leads to next
// (a restart record when restart is not 0).
func (x *run) appendRecord(cur, next string, restart int) error {
	set, deleted, lines := x.pctx.takeChanges()
	rec := &journalRecord{Node: cur, Next: next, Outcome: x.cp.Outcomes[cur], Visits: x.cp.Visits[cur],
		GoalGateRetries: x.cp.GoalGateRetries, Context: set, Deleted: deleted, Log: lines,
		Elapsed: x.elapsed(), Time: x.r.clock().Now().UTC(), Restart: restart}
	x.mu.Lock()
	rec.Usage = x.cp.Usage
	if len(x.touched) > 0 {
		rec.Nodes = make(map[string]*NodeResult, len(x.touched))
		for id := range x.touched {
			rec.Nodes[id] = x.nodes[id] // encoded before the next stage changes it
			if n, ok := x.cp.RetryCounts[id]; ok {
				if rec.Retries == nil {
					rec.Retries = map[string]int{}
				}
				rec.Retries[id] = n
			}
		}
		clear(x.touched)
	}
	x.mu.Unlock()
	if err := x.jr.append(rec); err != nil {
		return err
	}
	x.cp.CurrentNode, x.cp.NextNode, x.cp.Elapsed, x.cp.SavedAt = cur, next, rec.Elapsed, rec.Time
	if x.jr.due() {
		if err := x.compact(); err != nil {
			return err
		}
	}
	x.emit(Event{Kind: EventCheckpointSaved, NodeID: cur})
	return nil
}

// compact writes the whole state to checkpoint.json and empties the
// journal. A crash between the two leaves records the checkpoint already
// holds: the fold skips them by their seq.
func (x *run) compact() error {
	x.cp.Context = x.pctx.Snapshot()
	x.cp.Log = x.pctx.Log()
	x.cp.Elapsed = x.elapsed()
	x.cp.SavedAt = x.r.clock().Now().UTC()
	x.cp.JournalSeq = x.jr.seq
	x.pctx.takeChanges() // the checkpoint holds them
	x.mu.Lock()
	clear(x.touched)
	x.mu.Unlock()
	n, err := writeCheckpoint(x.cfg.RunDir, x.cp)
	if err != nil {
		return err
	}
	return x.jr.reset(n)
}

// startJournal opens the run's journal after the checkpoint's last record
// and compacts: checkpoint.json holds the whole state, the journal is
// empty.
func (x *run) startJournal() error {
	jr, err := openJournal(x.cfg.RunDir, x.cp.JournalSeq)
	if err != nil {
		return err
	}
	x.jr = jr
	if err := x.compact(); err != nil {
		jr.close()
		return err
	}
	return nil
}
