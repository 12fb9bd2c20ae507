package envconfig_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"crawlq/internal/envconfig"
	"crawlq/internal/lambdafn"
)

// TestVarsNameTheProcessesThatReadThem: every variable a loader reads is documented as read by
// the processes that run that loader (docs/configuration.md's "Read by" column), for the
// loaders every function, the migrate function, the dispatch function and the maintaining
// processes run.
func TestVarsNameTheProcessesThatReadThem(t *testing.T) {
	t.Parallel()
	readBy := map[string][]envconfig.Process{}
	for _, v := range envconfig.Vars {
		readBy[v.Name] = v.Read
	}
	check := func(loader string, procs []envconfig.Process, load func(envconfig.Env)) {
		t.Helper()
		seen := map[string]bool{}
		// Values that take every branch that reads a variable: a host with IAM auth, runtime
		// fargate.
		vals := map[string]string{"CRAWLQ_DB_HOST": "h", "CRAWLQ_DB_IAM_AUTH": "true", "CRAWLQ_DB_USER": "u",
			"CRAWLQ_CRAWL_RUNTIME": "fargate"}
		load(envconfig.New(func(k string) string { seen[k] = true; return vals[k] }))
		if len(seen) == 0 {
			t.Fatalf("%s read nothing", loader)
		}
		for name := range seen {
			for _, p := range procs {
				if !slices.Contains(readBy[name], p) {
					t.Errorf("%s reads %s, which Vars does not say %s reads", loader, name, p)
				}
			}
		}
	}
	functions := []envconfig.Process{envconfig.API, envconfig.Worker, envconfig.Dispatch, envconfig.Metrics}
	// crawlq local (CLI) assembles its functions through NewDeps, which runs LoadConfig.
	check("lambdafn.LoadConfig", []envconfig.Process{envconfig.CLI}, func(e envconfig.Env) { lambdafn.LoadConfig(e) })
	for _, fn := range functions {
		check("lambdafn.LoadFunctionConfig("+string(fn)+")", []envconfig.Process{fn}, func(e envconfig.Env) { lambdafn.LoadFunctionConfig(fn, e) })
	}
	// The other way: a variable of the functions' own configuration (its groups) that Vars says a
	// function reads, that function's loaders read (the dispatch's maintenance among them).
	for _, fn := range functions {
		seen := map[string]bool{}
		vals := map[string]string{"CRAWLQ_CRAWL_RUNTIME": "fargate"}
		e := envconfig.New(func(k string) string { seen[k] = true; return vals[k] })
		lambdafn.LoadFunctionConfig(fn, e)
		if fn == envconfig.Dispatch {
			envconfig.ECSLauncher(e, nil) // the dispatch function's main reads it beside its config
		}
		for _, v := range envconfig.Vars {
			own := v.Group == "Functions" || v.Group == "API" || v.Group == "Dispatch" || v.Group == "Maintenance"
			if own && slices.Contains(v.Read, fn) && !seen[v.Name] {
				t.Errorf("Vars says the %s function reads %s, which its config (lambdafn.LoadFunctionConfig) does not", fn, v.Name)
			}
		}
	}
	awsCfg := aws.Config{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}}
	check("envconfig.DB", append(functions, envconfig.Migrate, envconfig.Runner, envconfig.CLI),
		func(e envconfig.Env) { envconfig.DB(context.Background(), e, awsCfg, 0) })
	check("envconfig.Maintain", []envconfig.Process{envconfig.Dispatch, envconfig.Runner, envconfig.CLI},
		func(e envconfig.Env) { envconfig.Maintain(e) })
	check("envconfig.ECSLauncher", []envconfig.Process{envconfig.Dispatch},
		func(e envconfig.Env) { envconfig.ECSLauncher(e, nil) })
	check("envconfig.GC", []envconfig.Process{envconfig.Worker},
		func(e envconfig.Env) { envconfig.GC(e) })
}
