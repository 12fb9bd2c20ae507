package cli

import (
	"context"
	"errors"
	"flag"
)

// runnerCmd is `crawlq runner` (owned by the ECS work; this is its placeholder).
func runnerCmd() *Command {
	return &Command{
		Name: "runner", Synopsis: "run the ECS runner: long crawls and command spiders", Usage: "[flags]",
		Help: `Not available in this build yet.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			return func(context.Context, []string) error {
				return errors.New("crawlq runner is not available in this build yet")
			}
		},
	}
}
