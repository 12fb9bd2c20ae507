// Package deploy runs Terraform for `crawlq deploy`, `crawlq plan` and `crawlq destroy`.
//
// It owns how crawlq calls Terraform: which variables and environment it passes, where state
// and provider caches live, and how outputs come back. It drives the real terraform binary
// through hashicorp/terraform-exec; the arguments and environment are built by pure functions
// (Config.VarArgs, Config.Environ) so they can be tested without running Terraform. What a
// destroy would refuse or keep is read from the local state file itself (Config.Kept), without
// starting the provider.
//
// Building the Lambda zips and the runner image and running migrations belong to the CLI;
// it plugs them in through Config.BeforeApply and Config.AfterApply.
package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"
)

// ErrInvalidConfig is returned (wrapped, naming the field) when a Config cannot be used.
var ErrInvalidConfig = errors.New("invalid deploy config")

// StateFile is the name of the local state file inside WorkDir.
const StateFile = "terraform.tfstate"

// EndpointVar is the root-module variable that points the AWS provider at an emulator.
// When AWS_ENDPOINT_URL is set (in Config.Env or the process) and Vars does not set this,
// it is passed automatically, so `crawlq deploy` works against LocalStack/moto unchanged.
const EndpointVar = "aws_endpoint"

// Config says which Terraform to run where.
type Config struct {
	// Dir is the Terraform root module (the repository's terraform/). Required.
	Dir string
	// WorkDir holds state (terraform.tfstate) and the provider cache (.terraform, via
	// TF_DATA_DIR), so the source tree stays clean. Default: Dir.
	WorkDir string
	// ExecPath is the terraform binary. Default: "terraform" found on PATH.
	ExecPath string
	// Vars are passed as -var name=value. Default: none.
	Vars map[string]string
	// Env is added over the process environment of terraform (AWS_*, TF_CLI_CONFIG_FILE, ...).
	// TF_VAR_* entries become variables (Vars win). Default: none.
	Env map[string]string
	// Base is the environment terraform starts from, as KEY=value lines (its TF_VAR_* become
	// variables too): the caller's process environment as its edge read it. Default (nil):
	// os.Environ().
	Base []string
	// NoRefresh plans without reading the real resources first (-refresh=false): faster, and
	// only right just after an apply. Default: false (refresh).
	NoRefresh bool
	// Stdout receives terraform's human-readable output. Default: discarded.
	Stdout io.Writer
	// BeforeApply runs after init and before apply (build zips, push the image). Default: none.
	BeforeApply func(ctx context.Context) error
	// AfterApply runs after a successful apply with its outputs (run migrations). Default: none.
	AfterApply func(ctx context.Context, outputs map[string]string) error
}

func (c Config) validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: Dir is empty", ErrInvalidConfig)
	}
	if st, err := os.Stat(c.Dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: Dir %q is not a directory", ErrInvalidConfig, c.Dir)
	}
	for k := range c.Vars {
		if k == "" || strings.ContainsAny(k, "= \t\n") {
			return fmt.Errorf("%w: Vars has a bad variable name %q", ErrInvalidConfig, k)
		}
	}
	for k := range c.Env {
		if k == "" || strings.Contains(k, "=") {
			return fmt.Errorf("%w: Env has a bad name %q", ErrInvalidConfig, k)
		}
	}
	return nil
}

func (c Config) workDir() string {
	if c.WorkDir == "" {
		return c.Dir
	}
	return c.WorkDir
}

// StatePath is where the local backend keeps state.
func (c Config) StatePath() string { return filepath.Join(c.workDir(), StateFile) }

// managed reports whether terraform-exec refuses to let callers set an environment variable
// (it sets these itself, or they must go through options).
func managed(k string) bool {
	if strings.HasPrefix(k, "TF_VAR_") || strings.HasPrefix(k, "TF_CLI_ARGS") {
		return true
	}
	return len(tfexec.ProhibitedEnv(map[string]string{k: ""})) > 0
}

// base is Base, else the process's environment.
func (c Config) base() []string {
	if c.Base != nil {
		return c.Base
	}
	return os.Environ()
}

// Environ returns terraform's environment: base (normally Config.Base) with Env over it,
// TF_DATA_DIR inside WorkDir, and without the variables terraform-exec manages itself.
func (c Config) Environ(base []string) map[string]string {
	env := make(map[string]string, len(base)+len(c.Env)+1)
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if ok && !managed(k) {
			env[k] = v
		}
	}
	for k, v := range c.Env {
		if !managed(k) {
			env[k] = v
		}
	}
	env["TF_DATA_DIR"] = filepath.Join(c.workDir(), ".terraform")
	return env
}

// Variables returns the Terraform variables to pass: TF_VAR_* from base and Env, then
// aws_endpoint from AWS_ENDPOINT_URL, then Vars (each later source wins).
func (c Config) Variables(base []string) map[string]string {
	vars := map[string]string{}
	endpoint := ""
	take := func(k, v string) {
		if name, ok := strings.CutPrefix(k, "TF_VAR_"); ok && name != "" {
			vars[name] = v
		}
		if k == "AWS_ENDPOINT_URL" {
			endpoint = v
		}
	}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			take(k, v)
		}
	}
	for k, v := range c.Env {
		take(k, v)
	}
	if _, set := vars[EndpointVar]; !set && endpoint != "" {
		vars[EndpointVar] = endpoint
	}
	for k, v := range c.Vars {
		vars[k] = v
	}
	return vars
}

// VarArgs returns the variables as sorted "name=value" strings (each becomes one -var).
func (c Config) VarArgs(base []string) []string {
	vars := c.Variables(base)
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// terraform builds the terraform-exec handle: binary, directory, environment, output.
func (c Config) terraform() (*tfexec.Terraform, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	execPath := c.ExecPath
	if execPath == "" {
		p, err := exec.LookPath("terraform")
		if err != nil {
			return nil, fmt.Errorf("find terraform: %w (install Terraform or set ExecPath)", err)
		}
		execPath = p
	}
	if err := os.MkdirAll(c.workDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create work dir: %w", err)
	}
	tf, err := tfexec.NewTerraform(c.Dir, execPath)
	if err != nil {
		return nil, fmt.Errorf("create terraform: %w", err)
	}
	if err := tf.SetEnv(c.Environ(c.base())); err != nil {
		return nil, fmt.Errorf("set terraform env: %w", err)
	}
	var out io.Writer = io.Discard
	if c.Stdout != nil {
		// terraform-exec copies stdout and stderr from two goroutines: one lock makes any
		// writer safe for that.
		out = &lockedWriter{w: c.Stdout}
	}
	tf.SetStdout(out)
	tf.SetStderr(out)
	return tf, nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Init runs `terraform init` with the local backend pointed at StatePath.
func (c Config) Init(ctx context.Context) error {
	tf, err := c.terraform()
	if err != nil {
		return err
	}
	return c.init(ctx, tf)
}

func (c Config) init(ctx context.Context, tf *tfexec.Terraform) error {
	if err := tf.Init(ctx, tfexec.BackendConfig("path="+c.StatePath()), tfexec.Reconfigure(true)); err != nil {
		return fmt.Errorf("init terraform: %w", err)
	}
	return nil
}

func (c Config) planOpts(extra ...tfexec.PlanOption) []tfexec.PlanOption {
	var opts []tfexec.PlanOption
	for _, v := range c.VarArgs(c.base()) {
		opts = append(opts, tfexec.Var(v))
	}
	if c.NoRefresh {
		opts = append(opts, tfexec.Refresh(false))
	}
	return append(opts, extra...)
}

// Plan runs init and `terraform plan` and reports whether anything would change.
func (c Config) Plan(ctx context.Context) (changes bool, err error) {
	tf, err := c.terraform()
	if err != nil {
		return false, err
	}
	if err := c.init(ctx, tf); err != nil {
		return false, err
	}
	changes, err = tf.Plan(ctx, c.planOpts()...)
	if err != nil {
		return false, fmt.Errorf("plan terraform: %w", err)
	}
	return changes, nil
}

// PlanJSON runs init and plan into a plan file in WorkDir and returns its JSON form
// (`terraform show -json`), for checks on what would be deployed, and whether anything
// would change.
func (c Config) PlanJSON(ctx context.Context) (plan *tfjson.Plan, changes bool, err error) {
	tf, err := c.terraform()
	if err != nil {
		return nil, false, err
	}
	if err := c.init(ctx, tf); err != nil {
		return nil, false, err
	}
	planFile := filepath.Join(c.workDir(), "crawlq.tfplan")
	defer os.Remove(planFile)
	changes, err = tf.Plan(ctx, c.planOpts(tfexec.Out(planFile))...)
	if err != nil {
		return nil, false, fmt.Errorf("plan terraform: %w", err)
	}
	plan, err = tf.ShowPlanFile(ctx, planFile)
	if err != nil {
		return nil, false, fmt.Errorf("show plan: %w", err)
	}
	return plan, changes, nil
}

// Apply runs init, BeforeApply, `terraform apply`, then AfterApply, and returns the outputs.
func (c Config) Apply(ctx context.Context) (outputs map[string]string, err error) {
	tf, err := c.terraform()
	if err != nil {
		return nil, err
	}
	if err := c.init(ctx, tf); err != nil {
		return nil, err
	}
	if c.BeforeApply != nil {
		if err := c.BeforeApply(ctx); err != nil {
			return nil, fmt.Errorf("before apply: %w", err)
		}
	}
	var opts []tfexec.ApplyOption
	for _, v := range c.VarArgs(c.base()) {
		opts = append(opts, tfexec.Var(v))
	}
	if err := tf.Apply(ctx, opts...); err != nil {
		return nil, fmt.Errorf("apply terraform: %w", err)
	}
	outputs, err = c.outputs(ctx, tf)
	if err != nil {
		return nil, err
	}
	if c.AfterApply != nil {
		if err := c.AfterApply(ctx, outputs); err != nil {
			return outputs, fmt.Errorf("after apply: %w", err)
		}
	}
	return outputs, nil
}

// Outputs returns the outputs of the current state.
func (c Config) Outputs(ctx context.Context) (map[string]string, error) {
	tf, err := c.terraform()
	if err != nil {
		return nil, err
	}
	return c.outputs(ctx, tf)
}

func (c Config) outputs(ctx context.Context, tf *tfexec.Terraform) (map[string]string, error) {
	meta, err := tf.Output(ctx)
	if err != nil {
		return nil, fmt.Errorf("read terraform outputs: %w", err)
	}
	return FlattenOutputs(meta)
}

// FlattenOutputs turns Terraform outputs into strings: string outputs as they are, anything
// else (maps, lists, numbers) as compact JSON.
func FlattenOutputs(meta map[string]tfexec.OutputMeta) (map[string]string, error) {
	out := make(map[string]string, len(meta))
	for k, m := range meta {
		var s string
		if err := json.Unmarshal(m.Value, &s); err == nil {
			out[k] = s
			continue
		}
		var v any
		if err := json.Unmarshal(m.Value, &v); err != nil {
			return nil, fmt.Errorf("decode output %s: %w", k, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode output %s: %w", k, err)
		}
		out[k] = string(b)
	}
	return out, nil
}

// ErrDeletionProtected is returned by Destroy, before anything is deleted, when the deployed
// database still has deletion protection on: `terraform destroy` would delete everything else
// and then fail on the database, leaving the stack half-way.
var ErrDeletionProtected = errors.New("the deployed database has deletion protection on")

// Protected returns the addresses of the resources in the current state that refuse deletion
// (RDS instances with deletion_protection on). An empty or missing state has none.
func (c Config) Protected(ctx context.Context) ([]string, error) {
	f, err := c.facts()
	return f.protected, err
}

// Kept is what a destroy of the current state leaves behind on purpose.
type Kept struct {
	// Address is the resource whose deletion leaves it (module.database.aws_db_instance.this).
	Address string
	// What it is, e.g. "final DB snapshot".
	What string
	// Name is its identifier in AWS.
	Name string
	// Delete is the command that deletes it, once it is no longer wanted.
	Delete string
}

// Kept returns what destroying the current state keeps: the final snapshot of each RDS
// instance that takes one. An empty or missing state keeps nothing. (Destroy returns the same.)
func (c Config) Kept(ctx context.Context) ([]Kept, error) {
	f, err := c.facts()
	return f.kept, err
}

type stateFacts struct {
	protected []string
	kept      []Kept
}

// stateFormat is the version of Terraform's state snapshot format that facts reads: the one
// every Terraform 1.x writes (its compatibility promises cover it).
const stateFormat = 4

// rawState is what facts needs of a state snapshot: each managed resource instance's address
// parts and attributes.
type rawState struct {
	Version   int `json:"version"`
	Resources []struct {
		Module    string `json:"module"`
		Mode      string `json:"mode"`
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			IndexKey   any            `json:"index_key"`
			Attributes map[string]any `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

// facts reads the state file of the local backend (StatePath) itself: `terraform show -json`
// would start the ~700 MB AWS provider for its schema (seconds of CPU, and in the stack tests
// 3-28 s of wall time), and print the whole state (~230 KB) to Stdout through terraform-exec.
// A snapshot of another format version is refused, naming it.
func (c Config) facts() (stateFacts, error) {
	b, err := os.ReadFile(c.StatePath())
	if errors.Is(err, os.ErrNotExist) {
		return stateFacts{}, nil
	}
	if err != nil {
		return stateFacts{}, fmt.Errorf("read state: %w", err)
	}
	var st rawState
	if err := json.Unmarshal(b, &st); err != nil {
		return stateFacts{}, fmt.Errorf("read state %s: %w", c.StatePath(), err)
	}
	if st.Version != stateFormat {
		return stateFacts{}, fmt.Errorf("read state %s: format version %d, crawlq reads version %d", c.StatePath(), st.Version, stateFormat)
	}
	var f stateFacts
	for _, r := range st.Resources {
		if r.Mode != "managed" || r.Type != "aws_db_instance" {
			continue
		}
		for _, in := range r.Instances {
			addr := r.Type + "." + r.Name + indexSuffix(in.IndexKey)
			if r.Module != "" {
				addr = r.Module + "." + addr
			}
			a := in.Attributes
			if a["deletion_protection"] == true {
				f.protected = append(f.protected, addr)
			}
			if snap, _ := a["final_snapshot_identifier"].(string); snap != "" && a["skip_final_snapshot"] != true {
				f.kept = append(f.kept, Kept{Address: addr, What: "final DB snapshot", Name: snap,
					Delete: "aws rds delete-db-snapshot --db-snapshot-identifier " + snap})
			}
		}
	}
	slices.Sort(f.protected)
	return f, nil
}

// indexSuffix is an instance's index in its address: [0] for count, ["key"] for for_each.
func indexSuffix(key any) string {
	switch k := key.(type) {
	case nil:
		return ""
	case string:
		b, _ := json.Marshal(k)
		return "[" + string(b) + "]"
	default:
		return fmt.Sprintf("[%v]", k)
	}
}

// Destroy runs init, reads the state once, refuses (ErrDeletionProtected, before deleting
// anything) when something in it refuses deletion, then runs `terraform destroy` and returns what
// the destroy kept (Kept, as read before it ran). Neither the state nor the destroy plan (every
// resource's attributes) is written to Stdout: terraform's output goes to DestroyLog in WorkDir.
// One init and one read of the state: each terraform command that reads the state starts the AWS
// provider to load its schema, seconds of CPU.
func (c Config) Destroy(ctx context.Context) (kept []Kept, err error) {
	tf, err := c.terraform()
	if err != nil {
		return nil, err
	}
	if err := c.init(ctx, tf); err != nil {
		return nil, err
	}
	f, err := c.facts()
	if err != nil {
		return nil, err
	}
	if len(f.protected) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrDeletionProtected, strings.Join(f.protected, ", "))
	}
	var opts []tfexec.DestroyOption
	for _, v := range c.VarArgs(c.base()) {
		opts = append(opts, tfexec.Var(v))
	}
	// terraform destroy prints its plan first: every attribute of every resource (~250 KB for
	// the stack). That goes to a log file in WorkDir; Stdout gets where it is and the outcome.
	logPath := filepath.Join(c.workDir(), DestroyLog)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create destroy log: %w", err)
	}
	defer logFile.Close()
	lw := &lockedWriter{w: logFile}
	tf.SetStdout(lw)
	tf.SetStderr(lw)
	out := c.Stdout
	if out == nil {
		out = io.Discard
	}
	fmt.Fprintf(out, "terraform destroy: running (its full output goes to %s)\n", logPath)
	if err := tf.Destroy(ctx, opts...); err != nil {
		return nil, fmt.Errorf("destroy terraform (full output in %s): %w", logPath, err)
	}
	if line := lastLine(logPath, "Destroy complete!"); line != "" {
		fmt.Fprintf(out, "terraform destroy: %s\n", line)
	}
	return f.kept, nil
}

// DestroyLog is the file in WorkDir that receives terraform destroy's output.
const DestroyLog = "destroy.log"

// lastLine returns the last line of the file at path that contains substr, trimmed.
func lastLine(path, substr string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	found := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, substr) {
			found = strings.TrimSpace(l)
		}
	}
	return found
}
