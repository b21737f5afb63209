package pipeline

import (
	"reflect"
	"testing"
)

// fuzzRecord sets every field of journalRecord, so that a field added to
// the record but not to its hand-written encoder (appendJSON) fails
// FuzzJournalRecord instead of vanishing from the journal (as restart once
// did).
func TestFuzzRecordSetsEveryField(t *testing.T) {
	v := reflect.ValueOf(*fuzzRecord("s", 5, 1.5, 2.5))
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("fuzzRecord leaves journalRecord.%s zero: set it, and make sure appendJSON writes it", v.Type().Field(i).Name)
		}
	}
}
