package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"crawlq/internal/dispatch"
)

// wakeDispatch tells the dispatcher that runIDs changed, so it acts now rather than at its next
// tick: a NOTIFY for a dispatcher listening on the database (`crawlq local`'s), and, with
// $CRAWLQ_DISPATCH_FUNCTION set, an asynchronous poke of that Lambda function, as the api sends
// after a schedule (a deployed dispatcher listens to nothing: RDS Proxy pins sessions that
// LISTEN). The change is committed already: a failed wake only delays it to the next tick, so it
// is a warning, not the command's failure.
func wakeDispatch(ctx context.Context, env *Env, wenv wakeEnv, db dispatch.Execer, runIDs ...int64) {
	if err := dispatch.Wake(ctx, db, runIDs...); err != nil {
		fmt.Fprintf(env.Stderr, "crawlq: warning: %v (a crawlq local acts on it at its next tick)\n", err)
	}
	fn := wenv.DispatchFunction
	if fn == "" {
		return
	}
	if err := pokeFunction(ctx, wenv, runIDs); err != nil {
		fmt.Fprintf(env.Stderr, "crawlq: warning: poke %s: %v (its next tick acts on it)\n", fn, err)
	}
}

// pokeFunction invokes the dispatch function wenv names asynchronously with the api's poke
// payload, with the AWS variables the command read at its start.
func pokeFunction(ctx context.Context, wenv wakeEnv, runIDs []int64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg, err := wenv.AWS.config(ctx)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(struct {
		Source string  `json:"source"`
		Runs   []int64 `json:"runs,omitempty"`
	}{dispatch.PokeSource, runIDs})
	if err != nil {
		return err
	}
	_, err = lambda.NewFromConfig(cfg).Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(wenv.DispatchFunction),
		InvocationType: lambdatypes.InvocationTypeEvent, Payload: payload})
	return err
}
