package cli

import (
	"context"
	"errors"
	"flag"
)

// localCmd is `crawlq local` (owned by the serverless work; this is its placeholder).
func localCmd() *Command {
	return &Command{
		Name: "local", Synopsis: "run the Lambda functions locally behind the Lambda Invoke API", Usage: "[flags]",
		Help: `Not available in this build yet.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			return func(context.Context, []string) error {
				return errors.New("crawlq local is not available in this build yet")
			}
		},
	}
}
