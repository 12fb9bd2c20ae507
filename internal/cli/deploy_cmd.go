package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"crawlq/internal/awsx"
	"crawlq/internal/db"
	"crawlq/internal/deploy"
	"crawlq/internal/envconfig"
	"crawlq/internal/migrate"
)

// deployFlags are the flags deploy, plan and destroy share.
type deployFlags struct {
	dir, workDir, tf, buildDir string
	vars                       kvFlag
}

func (d *deployFlags) declare(fs *flag.FlagSet) {
	d.vars = kvFlag{}
	fs.StringVar(&d.dir, "dir", "terraform", "the Terraform root module")
	fs.StringVar(&d.workDir, "work-dir", ".local/deploy", "where state and provider caches live")
	fs.StringVar(&d.tf, "terraform", "", "terraform binary (default: on PATH)")
	fs.StringVar(&d.buildDir, "build-dir", "", "use the Lambda zips in this directory instead of building them")
	fs.Var(d.vars, "var", "a Terraform variable name=value (repeatable)")
}

// config builds the deploy configuration; root is the repository (the module's parent).
func (d *deployFlags) config(env *Env, de deployEnv) (deploy.Config, string, error) {
	dir, err := filepath.Abs(d.dir)
	if err != nil {
		return deploy.Config{}, "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "main.tf")); err != nil {
		return deploy.Config{}, "", usageErr("--dir %s: no Terraform root module there (main.tf); run from the repository or pass --dir", d.dir)
	}
	work, err := filepath.Abs(d.workDir)
	if err != nil {
		return deploy.Config{}, "", err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return deploy.Config{}, "", err
	}
	cfg := deploy.Config{Dir: dir, WorkDir: work, ExecPath: d.tf, Vars: map[string]string{}, Env: map[string]string{}, Base: de.Environ, Stdout: env.Stdout}
	for k, v := range d.vars {
		cfg.Vars[k] = v
	}
	root := filepath.Dir(dir)
	// Use the provider mirror this machine has, when the repository knows how to find it.
	if de.TFConfigFile == "" {
		if out, err := exec.Command(filepath.Join(root, "scripts", "tfrc.sh")).Output(); err == nil {
			cfg.Env["TF_CLI_CONFIG_FILE"] = strings.TrimSpace(string(out))
		}
	}
	if d.buildDir != "" {
		b, err := filepath.Abs(d.buildDir)
		if err != nil {
			return cfg, root, err
		}
		cfg.Vars["build_dir"] = b
	} else if _, ok := cfg.Vars["build_dir"]; !ok {
		cfg.Vars["build_dir"] = filepath.Join(root, "build")
	}
	return cfg, root, nil
}

func deployCmd() *Command {
	return &Command{
		Name: "deploy", Synopsis: "build and deploy the AWS stack with Terraform", Usage: "--var alarm_email=ADDR [--var k=v]... [--build-dir DIR] [--push-image]",
		Help: `Builds the Lambda zips (make lambdas) unless --build-dir is given, then runs terraform init,
plan and apply on terraform/ (state in --work-dir), pushes the runner image to the stack's ECR
repository (--push-image, the default against real AWS) and prints the outputs.

The schema is migrated by the stack's migrate function, which the apply invokes whenever its
code changed: it connects as the master user (to the instance itself, or through RDS Proxy when
the stack has one: db_proxy), applies the migrations and gives the application role (crawlq_app,
which every other function and the runners use) its IAM login.
With DATABASE_URL set, deploy also migrates that database.

Alarms need someone to notify: deploy refuses to run without --var alarm_email=ADDR (or
TF_VAR_alarm_email) unless --allow-no-alarm-email says alarms may go nowhere; against an
emulator (AWS_ENDPOINT_URL set, LocalStack or moto) it only warns.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			var d deployFlags
			d.declare(fs)
			push := fs.String("push-image", "auto", "build and push the runner image: true, false, or auto (true unless AWS_ENDPOINT_URL is set)")
			noAlarmEmail := fs.Bool("allow-no-alarm-email", false, "deploy even though alarm_email is empty (alarms then notify nobody)")
			return func(ctx context.Context, args []string) error {
				de, err := readDeployEnv(env)
				if err != nil {
					return err
				}
				cfg, root, err := d.config(env, de)
				if err != nil {
					return err
				}
				emulated := de.Endpoint != ""
				if err := checkAlarmEmail(cfg.Variables(cfg.Base), emulated, *noAlarmEmail, env.Stderr); err != nil {
					return err
				}
				pushImage := *push == "true" || (*push == "auto" && !emulated)
				if *push != "true" && *push != "false" && *push != "auto" {
					return usageErr("--push-image %q: want true, false or auto", *push)
				}
				cfg.BeforeApply = func(ctx context.Context) error {
					var targets []string
					if d.buildDir == "" {
						targets = append(targets, "lambdas")
					}
					if pushImage {
						targets = append(targets, "image")
					}
					if len(targets) == 0 {
						return nil
					}
					fmt.Fprintf(env.Stdout, "building: make %s\n", strings.Join(targets, " "))
					cmd := exec.CommandContext(ctx, "make", append([]string{"-C", root}, targets...)...)
					cmd.Stdout, cmd.Stderr = env.Stdout, env.Stderr
					if err := cmd.Run(); err != nil {
						return fmt.Errorf("build: %w", err)
					}
					return nil
				}
				cfg.AfterApply = func(ctx context.Context, out map[string]string) error {
					if pushImage {
						tag := cfg.Vars["image_tag"]
						if tag == "" {
							tag = "latest"
						}
						if err := pushRunnerImage(ctx, filepath.Join(root, "build", "runner-image.tar"), out["ecr_repository_url"]+":"+tag, env.Stdout); err != nil {
							return err
						}
					}
					if de.DatabaseURL != "" {
						if err := migrateURL(ctx, de.Database); err != nil {
							return fmt.Errorf("migrate DATABASE_URL: %w", err)
						}
						fmt.Fprintln(env.Stdout, "schema up to date on DATABASE_URL")
					}
					return nil
				}
				// No init before: Apply runs it (a second one would cost seconds).
				out, err := cfg.Apply(ctx)
				if err != nil {
					return err
				}
				printOutputs(env.Stdout, out)
				return nil
			}
		},
	}
}

func planCmd() *Command {
	return &Command{
		Name: "plan", Synopsis: "show what deploy would change", Usage: "[--var k=v]...",
		Help: `Runs terraform init and plan on terraform/ with the state of --work-dir. Exits 0 whether or not
there are changes, and says which.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			var d deployFlags
			d.declare(fs)
			return func(ctx context.Context, args []string) error {
				de, err := readDeployEnv(env)
				if err != nil {
					return err
				}
				cfg, _, err := d.config(env, de)
				if err != nil {
					return err
				}
				changes, err := cfg.Plan(ctx) // runs init
				if err != nil {
					return err
				}
				if changes {
					fmt.Fprintln(env.Stdout, "plan: changes pending (run crawlq deploy)")
				} else {
					fmt.Fprintln(env.Stdout, "plan: no changes")
				}
				return nil
			}
		},
	}
}

func destroyCmd() *Command {
	return &Command{
		Name: "destroy", Synopsis: "destroy the deployed AWS stack", Usage: "--yes [--var k=v]...",
		Help: `Runs terraform destroy on the stack recorded in --work-dir. Asks for --yes, since it deletes the
database and the items bucket.

The database is deployed with deletion protection (db_deletion_protection, default true). destroy
reads the state first and, while protection is on, refuses before deleting anything, printing
the two commands to run: a deploy that turns protection off, then destroy again. The items
bucket is deleted with every item version in it, and the ECR repository with its images. RDS
keeps a final snapshot <name>-final-<time of the first deploy> unless
db_skip_final_snapshot=true; destroy prints its name and how to delete it, and the next deploy's
snapshot gets a name of its own.`,
		Flags: func(fs *flag.FlagSet, env *Env) func(context.Context, []string) error {
			var d deployFlags
			d.declare(fs)
			yes := fs.Bool("yes", false, "really destroy")
			return func(ctx context.Context, args []string) error {
				if !*yes {
					return usageErr("destroy deletes the database and the items bucket; pass --yes to go ahead")
				}
				de, err := readDeployEnv(env)
				if err != nil {
					return err
				}
				cfg, _, err := d.config(env, de)
				if err != nil {
					return err
				}
				kept, err := cfg.Destroy(ctx)
				if err != nil {
					if errors.Is(err, deploy.ErrDeletionProtected) {
						return usageErr("%v; nothing was deleted. Turn protection off, then destroy:\n  %s\n  %s",
							err, d.command("deploy", "db_deletion_protection=false"), d.command("destroy --yes", ""))
					}
					return err
				}
				fmt.Fprintln(env.Stdout, "destroyed")
				for _, k := range kept {
					fmt.Fprintf(env.Stdout, "kept: %s %s (delete it when no longer needed: %s)\n", k.What, k.Name, k.Delete)
				}
				return nil
			}
		},
	}
}

// command renders the crawlq command line that repeats these flags for sub, with one more
// --var (extra, when not empty) replacing any earlier value of the same variable.
func (d *deployFlags) command(sub, extra string) string {
	args := []string{"crawlq", sub, "--dir", shellQuote(d.dir), "--work-dir", shellQuote(d.workDir)}
	if d.tf != "" {
		args = append(args, "--terraform", shellQuote(d.tf))
	}
	if d.buildDir != "" {
		args = append(args, "--build-dir", shellQuote(d.buildDir))
	}
	extraKey, _, _ := strings.Cut(extra, "=")
	keys := make([]string, 0, len(d.vars))
	for k := range d.vars {
		if k != extraKey || extra == "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "--var", shellQuote(k+"="+d.vars[k]))
	}
	if extra != "" {
		args = append(args, "--var", extra)
	}
	return strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// migrateURL brings the database of vars (DATABASE_URL) up to date.
func migrateURL(ctx context.Context, vars envconfig.DBVars) error {
	dc, err := vars.Resolve(ctx, aws.Config{})
	if err != nil {
		return err
	}
	pool, err := db.Open(ctx, dc)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = migrate.Up(ctx, pool)
	return err
}

// checkAlarmEmail refuses a deploy whose alarms would notify nobody (alarm_email empty) unless
// allowed; against an emulator it warns instead, since nothing there sends mail.
func checkAlarmEmail(vars map[string]string, emulated, allow bool, stderr io.Writer) error {
	if strings.TrimSpace(vars["alarm_email"]) != "" {
		return nil
	}
	const msg = "alarm_email is empty: the alarm topic has no subscriber, so alarms (dead jobs, jobs waiting past due, function errors, database CPU) notify nobody"
	switch {
	case allow:
		fmt.Fprintf(stderr, "WARNING: %s (--allow-no-alarm-email)\n", msg)
		return nil
	case emulated:
		fmt.Fprintf(stderr, "WARNING: %s (allowed against the emulator at AWS_ENDPOINT_URL)\n", msg)
		return nil
	}
	return usageErr("%s; pass --var alarm_email=ADDR (or set TF_VAR_alarm_email), or --allow-no-alarm-email to deploy anyway", msg)
}

func printOutputs(w io.Writer, out map[string]string) {
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintln(w, "outputs:")
	for _, k := range keys {
		fmt.Fprintf(w, "  %s = %s\n", k, out[k])
	}
}

// pushRunnerImage pushes the image tarball to ECR, authenticating with an ECR token.
func pushRunnerImage(ctx context.Context, tarPath, ref string, w io.Writer) error {
	if strings.HasPrefix(ref, ":") {
		return errors.New("push image: the stack has no ECR repository URL output")
	}
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		return fmt.Errorf("push image: read %s: %w", tarPath, err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("push image: %w", err)
	}
	awsCfg, err := awsx.Load(ctx)
	if err != nil {
		return err
	}
	tok, err := ecr.NewFromConfig(awsCfg).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil || len(tok.AuthorizationData) == 0 || tok.AuthorizationData[0].AuthorizationToken == nil {
		return fmt.Errorf("push image: ECR token: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(*tok.AuthorizationData[0].AuthorizationToken)
	if err != nil {
		return fmt.Errorf("push image: ECR token: %w", err)
	}
	user, pass, _ := strings.Cut(string(raw), ":")
	fmt.Fprintf(w, "pushing %s\n", tag)
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuth(&authn.Basic{Username: user, Password: pass})); err != nil {
		return fmt.Errorf("push image %s: %w", tag, err)
	}
	return nil
}
