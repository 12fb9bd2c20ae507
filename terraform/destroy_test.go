package terraform_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// awsCLI runs the real aws CLI against the emulator the test's environment points at, and
// decodes its JSON answer into out (when not nil).
func awsCLI(t *testing.T, ctx context.Context, out any, args ...string) {
	t.Helper()
	// --endpoint-url explicitly: this aws CLI ignores AWS_ENDPOINT_URL for some services (rds).
	cmd := exec.CommandContext(ctx, "aws", append(args, "--output", "json", "--endpoint-url", os.Getenv("AWS_ENDPOINT_URL"))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("aws %s: decode %q: %v", strings.Join(args, " "), b, err)
		}
	}
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

// leftovers lists what the emulated account still holds of the kinds the stack creates.
func leftovers(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var out []string
	count := func(what string, n int) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	var repos struct{ Repositories []any }
	awsCLI(t, ctx, &repos, "ecr", "describe-repositories")
	count("ECR repositories", len(repos.Repositories))
	var buckets struct{ Buckets []any }
	awsCLI(t, ctx, &buckets, "s3api", "list-buckets")
	count("S3 buckets", len(buckets.Buckets))
	var dbs struct{ DBInstances []any }
	awsCLI(t, ctx, &dbs, "rds", "describe-db-instances")
	count("DB instances", len(dbs.DBInstances))
	var fns struct{ Functions []any }
	awsCLI(t, ctx, &fns, "lambda", "list-functions")
	count("Lambda functions", len(fns.Functions))
	var secrets struct{ SecretList []any }
	awsCLI(t, ctx, &secrets, "secretsmanager", "list-secrets")
	count("secrets", len(secrets.SecretList))
	var topics struct{ Topics []any }
	awsCLI(t, ctx, &topics, "sns", "list-topics")
	count("SNS topics", len(topics.Topics))
	var vpcs struct{ Vpcs []struct{ IsDefault bool } }
	awsCLI(t, ctx, &vpcs, "ec2", "describe-vpcs")
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
