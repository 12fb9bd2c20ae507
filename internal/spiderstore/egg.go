package spiderstore

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// EggInfo is what crawlq reads from a Scrapy project egg (a zip made by `python setup.py
// bdist_egg`, as scrapyd-deploy builds it).
type EggInfo struct {
	// SettingsModule is the project's settings module, from the [scrapy] settings entry point
	// in EGG-INFO/entry_points.txt; it becomes SCRAPY_SETTINGS_MODULE, as under Scrapyd.
	SettingsModule string
}

var moduleRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// ParseEgg checks that egg is a zip with a Scrapy settings entry point and returns its info.
func ParseEgg(egg []byte) (EggInfo, error) {
	zr, err := zip.NewReader(bytes.NewReader(egg), int64(len(egg)))
	if err != nil {
		return EggInfo{}, fmt.Errorf("%w: egg is not a zip archive: %v", ErrInvalid, err)
	}
	var ep *zip.File
	for _, f := range zr.File {
		if f.Name == "EGG-INFO/entry_points.txt" {
			ep = f
		}
	}
	if ep == nil {
		return EggInfo{}, fmt.Errorf("%w: egg has no EGG-INFO/entry_points.txt (build it with scrapyd-deploy or `python setup.py bdist_egg` and entry_points={'scrapy': ['settings = PROJECT.settings']})", ErrInvalid)
	}
	rc, err := ep.Open()
	if err != nil {
		return EggInfo{}, fmt.Errorf("%w: egg: %v", ErrInvalid, err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(io.LimitReader(rc, 64<<10))
	section := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(line[1 : len(line)-1])
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && section == "scrapy" && strings.TrimSpace(k) == "settings" {
			mod := strings.TrimSpace(v)
			if i := strings.IndexByte(mod, ':'); i >= 0 {
				mod = strings.TrimSpace(mod[:i])
			}
			if !moduleRE.MatchString(mod) {
				return EggInfo{}, fmt.Errorf("%w: egg: settings entry point %q is not a module name", ErrInvalid, clip(mod))
			}
			return EggInfo{SettingsModule: mod}, nil
		}
	}
	if err := sc.Err(); err != nil {
		return EggInfo{}, fmt.Errorf("%w: egg: entry_points.txt: %v", ErrInvalid, err)
	}
	return EggInfo{}, fmt.Errorf("%w: egg has no [scrapy] settings entry point in EGG-INFO/entry_points.txt", ErrInvalid)
}

// Lister finds the spiders of a project egg.
type Lister interface {
	List(ctx context.Context, egg []byte, info EggInfo) ([]string, error)
}

// ScrapyLister runs `scrapy list` on the egg, as Scrapyd does: the names are Scrapy's own.
type ScrapyLister struct {
	// Scrapy is the scrapy executable. Default "scrapy" on PATH.
	Scrapy string
	// Timeout bounds the listing. Default 60s.
	Timeout time.Duration
}

// List implements Lister.
func (l ScrapyLister) List(ctx context.Context, egg []byte, info EggInfo) ([]string, error) {
	bin, timeout := l.Scrapy, l.Timeout
	if bin == "" {
		bin = "scrapy"
	}
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	dir, err := os.MkdirTemp("", "crawlq-egg-")
	if err != nil {
		return nil, fmt.Errorf("list spiders: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "project.egg")
	if err := os.WriteFile(path, egg, 0o600); err != nil {
		return nil, fmt.Errorf("list spiders: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "list")
	cmd.Dir = dir
	cmd.Env = append(EggEnv(os.Environ(), path, info), "SCRAPY_PROJECT=default")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("list spiders: %w", err)
		}
		return nil, fmt.Errorf("%w: `scrapy list` failed on the egg: %v: %s", ErrInvalid, err, failureOutput(stderr.String()))
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	return names, nil
}

// maxFailureOutput bounds the output a failed `scrapy list` adds to its error.
const maxFailureOutput = 4096

// failureOutput is what a failed Python command's error keeps of its stderr: the last line, which
// names the exception (ModuleNotFoundError: No module named 'x'), first, then the end of the
// traceback, up to maxFailureOutput bytes in all.
func failureOutput(stderr string) string {
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		return "(no output)"
	}
	last := msg[strings.LastIndexByte(msg, '\n')+1:]
	if len(last) > maxFailureOutput/4 {
		last = last[:maxFailureOutput/4] + "..."
	}
	tail := msg
	if room := maxFailureOutput - len(last); len(tail) > room {
		tail = tail[len(tail)-room:]
		if i := strings.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		tail = "...\n" + tail
	}
	if tail == last {
		return strings.ToValidUTF8(last, "?")
	}
	return strings.ToValidUTF8(last+"\n"+tail, "?")
}

// EggEnv returns env with the egg first on PYTHONPATH and its settings module set, as Scrapyd
// activates an egg (Python imports straight from the zip).
func EggEnv(env []string, eggPath string, info EggInfo) []string {
	out := make([]string, 0, len(env)+2)
	pp := eggPath
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PYTHONPATH="):
			if old := strings.TrimPrefix(kv, "PYTHONPATH="); old != "" {
				pp += string(os.PathListSeparator) + old
			}
		case strings.HasPrefix(kv, "SCRAPY_SETTINGS_MODULE="):
		default:
			out = append(out, kv)
		}
	}
	return append(out, "PYTHONPATH="+pp, "SCRAPY_SETTINGS_MODULE="+info.SettingsModule)
}

// AutoLister runs `scrapy list` (ScrapyLister) where a scrapy executable is on PATH, as Scrapyd
// does, and reads the sources (StaticLister) where there is none (the api Lambda function).
type AutoLister struct{}

// List implements Lister.
func (AutoLister) List(ctx context.Context, egg []byte, info EggInfo) ([]string, error) {
	if bin, err := exec.LookPath("scrapy"); err == nil {
		return ScrapyLister{Scrapy: bin}.List(ctx, egg, info)
	}
	return StaticLister{}.List(ctx, egg, info)
}

// StaticLister reads spider names from the egg's sources without running Python (the api
// function has none): every `name = "..."` class attribute in a module under a spiders package.
// It can miss names computed at import time; ScrapyLister is exact.
type StaticLister struct{}

var spiderNameRE = regexp.MustCompile(`(?m)^[ \t]+name[ \t]*=[ \t]*['"]([^'"\n]+)['"]`)

// List implements Lister.
func (StaticLister) List(_ context.Context, egg []byte, _ EggInfo) ([]string, error) {
	zr, err := zip.NewReader(bytes.NewReader(egg), int64(len(egg)))
	if err != nil {
		return nil, fmt.Errorf("%w: egg is not a zip archive: %v", ErrInvalid, err)
	}
	set := map[string]bool{}
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, ".py") || !strings.Contains(f.Name, "/spiders/") || f.UncompressedSize64 > 4<<20 {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%w: egg: %s: %v", ErrInvalid, f.Name, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, 4<<20))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: egg: %s: %v", ErrInvalid, f.Name, err)
		}
		for _, m := range spiderNameRE.FindAllSubmatch(b, -1) {
			set[string(m[1])] = true
		}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Eggs keeps egg bytes outside Postgres. The Store keeps them in crawlq_project_version itself
// when it has none (the local stack); S3Eggs keeps them under a prefix of a bucket (AWS).
type Eggs interface {
	Put(ctx context.Context, key string, egg []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
}

// S3Eggs stores eggs as objects Prefix + "<project>/<version>.egg" in Bucket.
type S3Eggs struct {
	Client *s3.Client
	Bucket string
	Prefix string // default "eggs/"
}

func (e S3Eggs) key(k string) string {
	p := e.Prefix
	if p == "" {
		p = "eggs/"
	}
	return p + k
}

// Put implements Eggs.
func (e S3Eggs) Put(ctx context.Context, key string, egg []byte) error {
	_, err := e.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.Bucket), Key: aws.String(e.key(key)),
		Body: bytes.NewReader(egg), ContentType: aws.String("application/zip")})
	if err != nil {
		return fmt.Errorf("put egg s3://%s/%s: %w", e.Bucket, e.key(key), err)
	}
	return nil
}

// Get implements Eggs.
func (e S3Eggs) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := e.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(e.Bucket), Key: aws.String(e.key(key))})
	if err != nil {
		return nil, fmt.Errorf("get egg s3://%s/%s: %w", e.Bucket, e.key(key), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("get egg s3://%s/%s: %w", e.Bucket, e.key(key), err)
	}
	return b, nil
}

// Delete implements Eggs.
func (e S3Eggs) Delete(ctx context.Context, key string) error {
	_, err := e.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(e.Bucket), Key: aws.String(e.key(key))})
	if err != nil {
		return fmt.Errorf("delete egg s3://%s/%s: %w", e.Bucket, e.key(key), err)
	}
	return nil
}
