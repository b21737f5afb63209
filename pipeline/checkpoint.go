package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// CheckpointFile and ManifestFile are the run directory's state files.
const (
	CheckpointFile = "checkpoint.json"
	ManifestFile   = "manifest.json"
)

// LockFile is the run directory's lock, held while a run runs there (Run,
// Resume): one process at a time.
const LockFile = ".lock"

// checkpointVersion is the checkpoint format: 2 has the spec's field
// names (5.3); 1, morph's earlier names, is still read. A resume refuses
// another.
const checkpointVersion = 2

// Run states in a checkpoint and a Result.
const (
	RunRunning  = "running"
	RunSuccess  = "success"
	RunFail     = "fail"
	RunCanceled = "canceled" // interrupted; resumable
	RunBudget   = "budget_exceeded"
)

// Checkpoint is the state of a run after a node, written atomically to the
// run directory after every node: enough to resume where it stopped.
type Checkpoint struct {
	Version int    `json:"version"`
	RunID   string `json:"run_id"`
	// GraphHash is the SHA-256 of the pipeline source; a resume of another
	// source is refused unless forced.
	GraphHash string `json:"graph_hash"`
	State     string `json:"state"` // one of the Run* states
	// CurrentNode is the node that just ran; NextNode the one the run
	// goes to ("" when the run is over).
	CurrentNode string `json:"current_node"`
	NextNode    string `json:"next_node"`
	// Completed lists the nodes run, in order, repeats included: the path.
	Completed []string `json:"completed_nodes"`
	// Outcomes are each node's last outcome.
	Outcomes map[string]*Outcome `json:"outcomes"`
	// Nodes are each node's results so far: attempts, durations, usage.
	Nodes       map[string]*NodeResult `json:"nodes"`
	RetryCounts map[string]int         `json:"node_retries"`
	Visits      map[string]int         `json:"visits"`
	// GoalGateRetries counts the jumps goal gates caused.
	GoalGateRetries int `json:"goal_gate_retries"`
	// Restarts counts the loop_restart edges taken: the current loop's
	// stage files are under restart-<Restarts>/ when it is not 0.
	Restarts int            `json:"restarts,omitempty"`
	Context  map[string]any `json:"context"`
	Log      []string       `json:"logs"`
	Usage    Usage          `json:"usage"`
	// Elapsed is the run's wall time so far, over all its resumes.
	Elapsed time.Duration `json:"elapsed_ns"`
	// FailedNode and FailureReason say why a failed run failed.
	FailedNode    string    `json:"failed_node,omitempty"`
	FailureReason string    `json:"failure_reason,omitempty"`
	SavedAt       time.Time `json:"timestamp"`
	// JournalSeq is the last journal record this checkpoint holds: a
	// fold applies only the records after it.
	JournalSeq int64 `json:"journal_seq,omitempty"`
}

// UnmarshalJSON reads a checkpoint of either version: version 1's field
// names are read into the same fields. Not only LoadCheckpoint needs it: a
// Checkpoint also travels inside other payloads (a Temporal workflow's
// continue-as-new input) written before an upgrade.
func (cp *Checkpoint) UnmarshalJSON(b []byte) error {
	type current Checkpoint // without this method
	if err := json.Unmarshal(b, (*current)(cp)); err != nil {
		return err
	}
	if cp.Version != 1 {
		return nil
	}
	var v1 struct {
		Completed   []string       `json:"completed"`
		RetryCounts map[string]int `json:"retry_counts"`
		Log         []string       `json:"log"`
		SavedAt     time.Time      `json:"saved_at"`
	}
	if err := json.Unmarshal(b, &v1); err != nil {
		return err
	}
	cp.Completed, cp.RetryCounts, cp.Log, cp.SavedAt = v1.Completed, v1.RetryCounts, v1.Log, v1.SavedAt
	return nil
}

// Manifest describes a run: what ran, from where, when.
type Manifest struct {
	RunID     string    `json:"run_id"`
	Name      string    `json:"name"`
	Goal      string    `json:"goal"`
	DotFile   string    `json:"dot_file"`
	GraphHash string    `json:"graph_hash"`
	StartedAt time.Time `json:"started_at"`
}

// SaveCheckpoint writes cp to dir atomically (temporary file, fsync,
// rename) as the whole state: a journal left in dir is removed.
func SaveCheckpoint(dir string, cp *Checkpoint) error {
	if _, err := writeCheckpoint(dir, cp); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, JournalFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// writeCheckpoint writes cp to dir atomically and returns its size.
func writeCheckpoint(dir string, cp *Checkpoint) (int, error) {
	cp.Version = checkpointVersion
	b, err := json.Marshal(cp) // not indented; jq reads it
	if err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, CheckpointFile), b); err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	return len(b), nil
}

// SaveManifest writes m to dir atomically.
func SaveManifest(dir string, m *Manifest) error {
	if err := writeJSONFile(filepath.Join(dir, ManifestFile), m); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

// LoadCheckpoint reads dir's checkpoint and folds into it the journal
// records written since (see journal.go): the state after the last node
// the run finished. A torn last record (a crash mid-write) is left out;
// a damaged record before it is an ErrJournalCorrupt.
func LoadCheckpoint(dir string) (*Checkpoint, error) {
	cp, _, err := loadCheckpoint(dir)
	return cp, err
}

// loadCheckpoint is LoadCheckpoint that also says how many bytes of torn
// journal tail it left out.
func loadCheckpoint(dir string) (*Checkpoint, int, error) {
	cp, err := readCheckpointFile(dir)
	if err != nil {
		return nil, 0, err
	}
	torn, err := cp.fold(dir)
	if err != nil {
		return nil, 0, err
	}
	return cp, torn, nil
}

// readCheckpointFile reads checkpoint.json alone.
func readCheckpointFile(dir string) (*Checkpoint, error) {
	path := filepath.Join(dir, CheckpointFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (is %s a run directory?)", path, err, dir)
	}
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cp.Version != checkpointVersion && cp.Version != 1 {
		return nil, fmt.Errorf("%s: checkpoint version %d, this morph reads %d", path, cp.Version, checkpointVersion)
	}
	return &cp, nil
}

// LoadManifest reads dir's manifest.
func LoadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (is %s a run directory?)", path, err, dir)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// endResult is the Result of the run that ended with cp (success or fail),
// in dir.
func (cp *Checkpoint) endResult(dir string) *Result {
	return &Result{RunID: cp.RunID, RunDir: dir, State: cp.State, FailedNode: cp.FailedNode, FailureReason: cp.FailureReason,
		Path: cp.Completed, Nodes: cp.Nodes, Usage: cp.Usage, Duration: cp.Elapsed, Context: cp.Context, Over: true}
}
