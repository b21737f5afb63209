package main

import (
	"context"
	"fmt"
	"os"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
	"log/slog"
)

func main() {
	cfg, err := config.Load(os.Args[1])
	if err != nil {
		panic(err)
	}
	rt, err := cfg.Open(context.Background(), slog.Default())
	if err != nil {
		panic(err)
	}
	_, rc, err := rt.Engine.Run(context.Background(), "task", engine.RunOptions{})
	fmt.Println("err:", err)
	for _, st := range rc.Steps {
		fmt.Printf("step %d %s: %q %s\n", st.StepNumber, st.Action, st.Observation, st.Error)
	}
}
