// Package reply is what every test plugin of guests/extism does at the end of
// an export: answer JSON through the Extism output, or report an error the
// Extism way (the error set, a non-zero return), which morph reads as a
// guest-reported error (host.ErrGuest).
package reply

import pdk "github.com/extism/go-pdk"

// JSON sets v, encoded, as the export's output and returns the export's
// success code; a value that does not encode is reported as an error.
func JSON(v any) int32 {
	if err := pdk.OutputJSON(v); err != nil {
		return Fail(err)
	}
	return 0
}

// Fail sets err as the export's error and returns the failure code.
func Fail(err error) int32 {
	pdk.SetError(err)
	return 1
}
