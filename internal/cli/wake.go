package cli

import (
	"context"
	"fmt"
	"io"

	"crawlq/internal/dispatch"
)

// wakeDispatch tells a dispatcher listening on the database (`crawlq local`'s) that runIDs
// changed, so it acts now rather than at its next tick. The change is committed already: a
// failed wake only delays it to that tick, so it is a warning, not the command's failure.
func wakeDispatch(ctx context.Context, stderr io.Writer, db dispatch.Execer, runIDs ...int64) {
	if err := dispatch.Wake(ctx, db, runIDs...); err != nil {
		fmt.Fprintf(stderr, "crawlq: warning: %v (a crawlq local acts on it at its next tick)\n", err)
	}
}
