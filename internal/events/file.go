package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"crawlq/internal/clock"
)

// FileBusPrefix marks an event bus setting (CRAWLQ_EVENT_BUS, --event-bus) that names a JSON
// Lines file instead of an EventBridge bus: file:PATH. It gives `crawlq local`, `crawlq worker`
// and `crawlq runner` somewhere to publish where there is no EventBridge.
const FileBusPrefix = "file:"

// FileBus returns the path a file: bus names, and whether bus is one.
func FileBus(bus string) (string, bool) {
	path, ok := strings.CutPrefix(bus, FileBusPrefix)
	return path, ok && path != ""
}

// FilePutter publishes run events by appending them to a file, a line each, in the envelope an
// EventBridge rule's target receives ({"version":"0","id":...,"detail-type":"Run State Change",
// "source":"crawlq","time":...,"region":"local","resources":[],"detail":{...}}), so what reads
// them (tail -f, jq, a script) sees what an SQS target would. A batch is one write, synced before
// PutEvents answers: an event marked published is on disk. Several processes may append to one
// file (O_APPEND); each batch's lines stay whole.
type FilePutter struct {
	// Clock dates entries that carry no time of their own, as EventBridge dates them on arrival.
	// Default (nil) the wall clock.
	Clock clock.Clock

	mu   sync.Mutex
	path string
}

// NewFilePutter returns a FilePutter appending to path, which it creates if need be (0644); it
// fails at once when the file cannot be opened for appending.
func NewFilePutter(path string) (*FilePutter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("events file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("events file: %w", err)
	}
	return &FilePutter{path: path}, nil
}

// Path is the file the events go to.
func (f *FilePutter) Path() string { return f.path }

// fileEvent is one line: EventBridge's event envelope.
type fileEvent struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// PutEvents appends the entries, answering as EventBridge does: an id per entry, or an error for
// the whole call when the file cannot be written (the publisher then retries them later).
func (f *FilePutter) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	var b strings.Builder
	out := &eventbridge.PutEventsOutput{Entries: make([]ebtypes.PutEventsResultEntry, len(in.Entries))}
	for i, e := range in.Entries {
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		t := clock.Or(f.Clock).Now().UTC()
		if e.Time != nil {
			t = e.Time.UTC()
		}
		detail := json.RawMessage(aws.ToString(e.Detail))
		if !json.Valid(detail) {
			detail, _ = json.Marshal(aws.ToString(e.Detail))
		}
		line, err := json.Marshal(fileEvent{Version: "0", ID: hex.EncodeToString(id), DetailType: aws.ToString(e.DetailType),
			Source: aws.ToString(e.Source), Account: "000000000000", Time: t.Format(time.RFC3339), Region: "local",
			Resources: append([]string{}, e.Resources...), Detail: detail})
		if err != nil {
			return nil, fmt.Errorf("events file: encode: %w", err)
		}
		b.Write(line)
		b.WriteByte('\n')
		out.Entries[i].EventId = aws.String(hex.EncodeToString(id))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("events file: %w", err)
	}
	_, werr := file.WriteString(b.String())
	if werr == nil {
		werr = file.Sync()
	}
	if cerr := file.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("events file %s: %w", f.path, werr)
	}
	return out, nil
}
