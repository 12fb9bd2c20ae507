package envconfig

import "crawlq/internal/gctune"

// GC reads what gctune decides by: the Go runtime's GOGC and GOMEMLIMIT (when set, they win) and
// a Lambda function's AWS_LAMBDA_FUNCTION_MEMORY_SIZE.
func GC(env Env) gctune.Env {
	return gctune.Env{GOGC: env.Getenv("GOGC"), GOMEMLIMIT: env.Getenv("GOMEMLIMIT"),
		LambdaMemoryMiB: env.String("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")}
}
