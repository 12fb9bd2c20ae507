package terraform_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// awsCLI runs the real aws CLI against the emulator the test's environment points at, and
// decodes its JSON answer into out (when not nil).
func awsCLI(t *testing.T, ctx context.Context, out any, args ...string) {
	t.Helper()
	awsCLIs(t, ctx, []awsCall{{out, args}})
}

// awsCall is one aws CLI command and where its JSON answer goes (out may be nil).
type awsCall struct {
	out  any
	args []string
}

// awsCLIs runs the calls side by side, as awsCLI runs one, and fails the test on the first
// call (in order) that failed.
func awsCLIs(t *testing.T, ctx context.Context, calls []awsCall) {
	t.Helper()
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { errs[i] = runAWS(ctx, c.out, c.args) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func runAWS(ctx context.Context, out any, args []string) error {
	// --endpoint-url explicitly: this aws CLI ignores AWS_ENDPOINT_URL for some services (rds).
	cmd := exec.CommandContext(ctx, "aws", append(args, "--output", "json", "--endpoint-url", os.Getenv("AWS_ENDPOINT_URL"))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("aws %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("aws %s: decode %q: %w", strings.Join(args, " "), b, err)
		}
	}
	return nil
}

// pushImage puts an image into the stack's repository through the ECR API, as a push does
// (the emulator has no registry to push layers to): a manifest naming a config and a layer.
func pushImage(t *testing.T, ctx context.Context, repo, tag string) {
	t.Helper()
	digest := func(s string) string { return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(s))) }
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config":        map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json", "size": 6, "digest": digest("config" + tag)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": 5, "digest": digest("layer" + tag)}},
	})
	f := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(f, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	awsCLI(t, ctx, nil, "ecr", "put-image", "--repository-name", repo, "--image-tag", tag, "--image-manifest", "file://"+f)
	var imgs struct{ ImageIds []any }
	awsCLI(t, ctx, &imgs, "ecr", "list-images", "--repository-name", repo)
	if len(imgs.ImageIds) == 0 {
		t.Fatalf("no image in %s after put-image", repo)
	}
}

// putItems writes items into the versioned bucket, one of them twice (so it holds an old
// version too), as a crawl does. moto evaluates the bucket's TLS-only policy, and its endpoint
// is plain HTTP, so the policy is lifted for the writes (as if they came over TLS) and put back
// as it was.
func putItems(t *testing.T, ctx context.Context, bucket string) {
	t.Helper()
	dir := t.TempDir()
	f := filepath.Join(dir, "items.jl")
	if err := os.WriteFile(f, []byte(`{"title":"a"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var pol struct{ Policy string }
	awsCLI(t, ctx, &pol, "s3api", "get-bucket-policy", "--bucket", bucket)
	pf := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pf, []byte(pol.Policy), 0o600); err != nil {
		t.Fatal(err)
	}
	awsCLI(t, ctx, nil, "s3api", "delete-bucket-policy", "--bucket", bucket)
	for _, key := range []string{"items/demo/1/part-0001.jl", "items/demo/1/part-0002.jl", "items/demo/1/part-0001.jl"} {
		awsCLI(t, ctx, nil, "s3api", "put-object", "--bucket", bucket, "--key", key, "--body", f)
	}
	var v struct{ Versions []any }
	awsCLI(t, ctx, &v, "s3api", "list-object-versions", "--bucket", bucket)
	if len(v.Versions) < 3 {
		t.Fatalf("bucket %s holds %d versions, want 3", bucket, len(v.Versions))
	}
	awsCLI(t, ctx, nil, "s3api", "put-bucket-policy", "--bucket", bucket, "--policy", "file://"+pf)
}

// leftovers lists what the emulated account still holds of the kinds the stack creates. The
// aws CLI calls run side by side: each one spends a second or more starting Python.
func leftovers(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var (
		repos   struct{ Repositories []any }
		buckets struct{ Buckets []any }
		dbs     struct{ DBInstances []any }
		fns     struct{ Functions []any }
		secrets struct{ SecretList []any }
		topics  struct{ Topics []any }
		vpcs    struct{ Vpcs []struct{ IsDefault bool } }
	)
	awsCLIs(t, ctx, []awsCall{
		{&repos, []string{"ecr", "describe-repositories"}},
		{&buckets, []string{"s3api", "list-buckets"}},
		{&dbs, []string{"rds", "describe-db-instances"}},
		{&fns, []string{"lambda", "list-functions"}},
		{&secrets, []string{"secretsmanager", "list-secrets"}},
		{&topics, []string{"sns", "list-topics"}},
		{&vpcs, []string{"ec2", "describe-vpcs"}},
	})
	var out []string
	count := func(what string, n int) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	count("ECR repositories", len(repos.Repositories))
	count("S3 buckets", len(buckets.Buckets))
	count("DB instances", len(dbs.DBInstances))
	count("Lambda functions", len(fns.Functions))
	count("secrets", len(secrets.SecretList))
	count("SNS topics", len(topics.Topics))
	n := 0
	for _, v := range vpcs.Vpcs {
		if !v.IsDefault {
			n++
		}
	}
	count("VPCs", n)
	return out
}

// snapshots returns the names of the account's manual DB snapshots.
func snapshots(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var s struct {
		DBSnapshots []struct{ DBSnapshotIdentifier string }
	}
	awsCLI(t, ctx, &s, "rds", "describe-db-snapshots")
	var out []string
	for _, x := range s.DBSnapshots {
		out = append(out, x.DBSnapshotIdentifier)
	}
	return out
}
