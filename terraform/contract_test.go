package terraform_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ecs"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	tfjson "github.com/hashicorp/terraform-json"
	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/api"
	"crawlq/internal/awsx"
	"crawlq/internal/db"
	"crawlq/internal/dbsetup"
	"crawlq/internal/dispatch"
	"crawlq/internal/envconfig"
	"crawlq/internal/image"
	"crawlq/internal/lambdafn"
	"crawlq/internal/migrate"
	"crawlq/internal/scrapyd"
)

// contractDB is a fresh database on the local server, migrated by the superuser (as the
// migrate step does with the master user), so the application role works in its public
// schema exactly as on RDS.
type contractDB struct {
	admin      *pgxpool.Pool // superuser, on the fresh database
	host, port string
	name       string
	superuser  string
}

func newContractDB(t *testing.T) *contractDB {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Fatal("DATABASE_URL is not set: run with `make test` (or scripts/localpg.sh start)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := db.Open(ctx, db.Config{URL: base, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	name := fmt.Sprintf("contract_%d", time.Now().UnixNano())
	if _, err := root.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	u.Path = "/" + name
	admin, err := db.Open(ctx, db.Config{URL: u.String(), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if r, err := db.Open(ctx, db.Config{URL: base, MaxConns: 1}); err == nil {
			_, _ = r.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
			r.Close()
		}
	})
	if _, err := migrate.Up(ctx, admin); err != nil {
		t.Fatal(err)
	}
	return &contractDB{admin: admin, host: u.Hostname(), port: u.Port(), name: name, superuser: u.User.Username()}
}

// local replaces, in a rendered environment, exactly what differs between RDS Proxy and the
// local server: the endpoint, and TLS (the local server has no certificate; the TLS
// verification itself is tested in internal/db). User, IAM auth and everything else stay as
// Terraform rendered them.
func (c *contractDB) local(env map[string]string) map[string]string {
	out := make(map[string]string, len(env)+3)
	for k, v := range env {
		out[k] = v
	}
	out["CRAWLQ_DB_HOST"] = c.host
	out["CRAWLQ_DB_PORT"] = c.port
	out["CRAWLQ_DB_NAME"] = c.name
	out["CRAWLQ_DB_TLS"] = "false"
	return out
}

// containerDef is the part of an ECS container definition the contract needs.
type containerDef struct {
	Name        string   `json:"name"`
	Image       string   `json:"image"`
	EntryPoint  []string `json:"entryPoint"`
	Command     []string `json:"command"`
	Environment []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"environment"`
}

// argv composes a container's argv as ECS and Docker do: the definition's entryPoint, else the
// image's; then the definition's command, else the image's Cmd (only when the entrypoint was
// not overridden).
func argv(def containerDef, cfg v1.Config) []string {
	ep, cmd := cfg.Entrypoint, cfg.Cmd
	if len(def.EntryPoint) > 0 {
		ep, cmd = def.EntryPoint, nil
	}
	if len(def.Command) > 0 {
		cmd = def.Command
	}
	return append(slices.Clone(ep), cmd...)
}

// extract writes the file at path (absolute, in the image) from img's layers to dst.
func extract(t *testing.T, img v1.Image, path, dst string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if "/"+strings.TrimPrefix(h.Name, "./") == path {
				b, _ := io.ReadAll(tr)
				rc.Close()
				if err := os.WriteFile(dst, b, 0o755); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		rc.Close()
	}
	t.Fatalf("%s is not in the image", path)
}

// checkRunnerContract builds the runner image as `make image` does, composes the argv and
// environment of the container the plan's task definition describes, runs that argv (the
// image's own binary) against a real PostgreSQL as the application role, and waits until the
// runner heartbeats as a worker of kind "ecs"; then stops it with SIGTERM as ECS would.
func checkRunnerContract(t *testing.T, plan *tfjson.Plan, cdb *contractDB) {
	t.Helper()
	tds := resources(plan, "aws_ecs_task_definition")
	if len(tds) != 1 {
		t.Fatalf("want 1 task definition, got %d", len(tds))
	}
	var defs []containerDef
	if err := json.Unmarshal([]byte(str(t, tds[0], "container_definitions")), &defs); err != nil {
		t.Fatalf("container_definitions: %v", err)
	}
	if len(defs) != 1 {
		t.Fatalf("want 1 container, got %d", len(defs))
	}
	def := defs[0]

	dir := t.TempDir()
	bin := filepath.Join(dir, "crawlq-linux-amd64")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/crawlq")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build crawlq: %v\n%s", err, out)
	}
	img, err := image.Build(image.Config{Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	args := argv(def, cf.Config)
	if len(args) == 0 || !strings.HasPrefix(args[0], "/") {
		t.Fatalf("container argv %q: want an absolute program path", args)
	}
	// The program is the image's own file at argv[0]: extract it and run it.
	prog := filepath.Join(dir, "rootfs-"+filepath.Base(args[0]))
	extract(t, img, args[0], prog)

	env := map[string]string{}
	for _, kv := range cf.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, e := range def.Environment {
		env[e.Name] = e.Value
	}
	env = cdb.local(env)
	// What ECS adds: the region and the task role's credentials (fake here; the IAM token is
	// signed locally and the local server's trust auth ignores it).
	env["AWS_REGION"] = "us-east-1"
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "testing", "testing"
	env["HOME"] = dir
	var envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}

	cmd := exec.Command(prog, args[1:]...)
	cmd.Env = envList
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", args, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for beat := false; !beat; {
		select {
		case err := <-exited:
			t.Fatalf("the runner container (argv %q) exited before it heartbeat: %v\n%s", args, err, out.String())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			t.Fatalf("the runner container (argv %q) did not heartbeat within 60s\n%s", args, out.String())
		case <-tick.C:
			var user string
			err := cdb.admin.QueryRow(ctx, `SELECT usename FROM pg_stat_activity a JOIN crawlq_worker w ON true
				WHERE w.kind = 'ecs' AND a.datname = current_database() AND a.usename = $1 LIMIT 1`, dbsetup.DefaultAppRole).Scan(&user)
			beat = err == nil && user == dbsetup.DefaultAppRole
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("runner after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Errorf("runner did not stop within 30s of SIGTERM\n%s", out.String())
	}
}

// checkLambdaContracts runs each function's handler in-process with the environment the plan
// renders for it (endpoint swapped for the local server), against moto for AWS calls: migrate
// first (master user, the real secret Terraform created in moto), then api, dispatch, metrics
// and worker as the application role.
func checkLambdaContracts(t *testing.T, plan *tfjson.Plan, cdb *contractDB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	envs := map[string]map[string]string{}
	for _, f := range resources(plan, "aws_lambda_function") {
		name := str(t, f, "function_name")
		if f.AttributeValues["handler"] != "bootstrap" || f.AttributeValues["runtime"] != "provided.al2023" {
			t.Errorf("%s: handler %v runtime %v, want bootstrap on provided.al2023 (make lambdas builds bootstrap)", name, f.AttributeValues["handler"], f.AttributeValues["runtime"])
		}
		var env []struct {
			Variables map[string]string `json:"variables"`
		}
		if err := json.Unmarshal([]byte(mustJSON(t, f.AttributeValues["environment"])), &env); err != nil || len(env) != 1 {
			t.Fatalf("%s environment: %v", name, err)
		}
		envs[strings.TrimPrefix(name, "crawlq-")] = cdb.local(env[0].Variables)
	}
	if got := slices.Sorted(maps.Keys(envs)); !slices.Equal(got, []string{"api", "dispatch", "metrics", "migrate", "worker"}) {
		t.Fatalf("functions %v", got)
	}
	awsCfg, err := awsx.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// migrate: as the master user (the local superuser stands in for it), reading the
	// secret the apply made in moto: the master's (without the proxy; its password is ignored by
	// the local server's trust auth) or the application role's (with it).
	menv := envs["migrate"]
	if menv["CRAWLQ_DB_USER"] != "crawlq" {
		t.Errorf("migrate connects as %q, want the master user", menv["CRAWLQ_DB_USER"])
	}
	menv["CRAWLQ_DB_USER"] = cdb.superuser
	if menv["CRAWLQ_DB_APP_IAM"] == "true" {
		// Without the proxy the role gets RDS's rds_iam: a stand-in on the local server.
		if _, err := cdb.admin.Exec(ctx, `DO $$ BEGIN CREATE ROLE rds_iam NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`); err != nil {
			t.Fatal(err)
		}
	}
	mcfg, err := envconfig.DBSetup(ctx, envconfig.Map(menv), awsCfg)
	if err != nil {
		t.Fatalf("migrate setup: %v", err)
	}
	defer mcfg.Pool.Close()
	res, err := dbsetup.Handler(mcfg)(ctx, []byte(`{"source":"deploy"}`))
	if err != nil || res.AppRole != dbsetup.DefaultAppRole {
		t.Fatalf("migrate handler: %+v, %v", res, err)
	}

	setup := func(fn string) *lambdafn.Deps {
		t.Helper()
		e := envs[fn]
		if e["CRAWLQ_DB_USER"] != dbsetup.DefaultAppRole || e["CRAWLQ_DB_SECRET_ARN"] != "" {
			t.Errorf("%s: user %q, secret %q; want the application role and no secret", fn, e["CRAWLQ_DB_USER"], e["CRAWLQ_DB_SECRET_ARN"])
		}
		d, err := lambdafn.Setup(ctx, envconfig.Process(fn), func(k string) string { return e[k] }, 4)
		if err != nil {
			t.Fatalf("%s setup with its rendered environment: %v", fn, err)
		}
		t.Cleanup(func() { _ = d.Close(context.Background()) })
		var user string
		if err := d.Pool.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil || user != dbsetup.DefaultAppRole {
			t.Fatalf("%s connects as %q (%v)", fn, user, err)
		}
		return d
	}
	lc := awslambda.NewFromConfig(awsCfg)

	dDeps := setup("dispatch")
	denv := envs["dispatch"]
	launcher, err := envconfig.ECSLauncher(envconfig.Map(denv), ecs.NewFromConfig(awsCfg))
	if err != nil {
		t.Fatalf("dispatch's ECS settings: %v", err)
	}
	if !launcher.AssignPublicIP {
		t.Errorf("dispatch starts runner tasks without a public IP; they sit in public subnets without NAT")
	}
	dcfg, err := dDeps.DispatchConfig(lc, launcher)
	if err != nil {
		t.Fatal(err)
	}
	// The default crawl_runtime puts the crawl queue on runner tasks, not worker Lambdas.
	if err := dDeps.RouteCrawlQueue(&dcfg, launcher); err != nil {
		t.Fatalf("dispatch's crawl runtime: %v", err)
	}
	if slices.Contains(dcfg.LambdaQueues, "crawl") || len(dcfg.Fleets) != 1 || dcfg.Fleets[0].Queue != "crawl" {
		t.Errorf("crawl queue: lambda queues %v, fleets %+v; want it on the runner fleet", dcfg.LambdaQueues, dcfg.Fleets)
	}
	// The tick runs before any job exists (moto has no Fargate capacity to start tasks on).
	dp, err := dispatch.New(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lambdafn.Dispatch(dp)(ctx, []byte(`{"source":"schedule"}`)); err != nil {
		t.Errorf("dispatch tick as the application role: %v", err)
	}

	mDeps := setup("metrics")
	var emf bytes.Buffer
	if _, err := mDeps.Metrics(&emf, envs["metrics"]["CRAWLQ_METRICS_NAMESPACE"])(ctx, nil); err != nil {
		t.Errorf("metrics as the application role: %v", err)
	}

	wDeps := setup("worker")
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := wDeps.Worker(lambdafn.WorkerOptions{ItemsBucket: envs["worker"]["CRAWLQ_ITEMS_BUCKET"], IdleExit: 500 * time.Millisecond})(wctx, dispatch.WorkerEvent{Queue: "crawl"}); err != nil {
		t.Errorf("worker as the application role: %v", err)
	}

	// Last, so that the run it schedules leaves no work for the ticks and the worker above.
	apiDeps := setup("api")
	a, err := api.New(apiDeps.APIConfig(lc))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := lambdafn.API(a)(ctx, []byte(`{"action":"schedule","spider":"demo"}`))
	if !strings.Contains(string(out), `"ok"`) {
		t.Errorf("api schedule as the application role: %s", out)
	}

	// The Scrapyd function URL, as functions/api wires it.
	aenv := envs["api"]
	checkScrapydURL(t, ctx, func(k string) string { return aenv[k] }, func(user, pass string) http.Handler {
		srv, err := scrapyd.New(scrapyd.Config{API: a, Store: apiDeps.Control.Store, Pool: apiDeps.Pool, RunLog: apiDeps.RunLog(),
			Username: user, Password: pass, MaxUploadBytes: api.MaxAddVersionBytes, Logger: apiDeps.Logger})
		if err != nil {
			t.Fatal(err)
		}
		return srv.Handler()
	})
}
