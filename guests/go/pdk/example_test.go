//go:build !wasip1

package pdk_test

import (
	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/guests/go/pdk"
)

// The README's deny-list guard (section "Sessions, middleware and the event
// stream"), compiled with the tests so that it cannot rot. A plugin calls
// this from its init.
func ExampleBeforeToolCall() {
	pdk.Plugin("guard", "1.0.0")
	pdk.BeforeToolCall(func(in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
		if in.Tool == "shell" {
			return abi.BeforeToolCallOutput{Deny: true, Reason: "shell is not allowed here"}, nil
		}
		return abi.BeforeToolCallOutput{}, nil
	})
}
