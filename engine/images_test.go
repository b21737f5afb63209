package engine

import (
	"context"
	"testing"

	"github.com/morphhost/morph/abi"
)

// imageTool answers a caption and one image.
type imageTool struct{ testTool }

func (t *imageTool) ExecuteImages(context.Context, map[string]any) (string, []abi.Image, error) {
	return "a chart [image 1: image/png]", []abi.Image{{MimeType: "image/png", Data: "iVBORw0KGgo="}}, nil
}

// A tool result's images reach the model with its observation when the
// model takes images, and only then; the text is the same either way.
func TestToolImagesReachTheModel(t *testing.T) {
	for _, on := range []bool{true, false} {
		m := script(toolCall("chart", `{}`), finalReply("done"))
		tool := &imageTool{testTool{name: "chart", schema: `{"type":"object"}`}}
		e := New(m, nil, WithBuiltinTools(tool), WithImages(on))
		if _, _, err := e.Run(context.Background(), "draw", RunOptions{}); err != nil {
			t.Fatal(err)
		}
		obs := m.last().Messages[len(m.last().Messages)-1]
		if obs.Content != "Tool Result (chart):\na chart [image 1: image/png]" {
			t.Errorf("images %v: observation %q", on, obs.Content)
		}
		if got := len(obs.Images); on && (got != 1 || obs.Images[0].Data != "iVBORw0KGgo=") || !on && got != 0 {
			t.Errorf("images %v: the model got %+v", on, obs.Images)
		}
	}
}
