package crawl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"crawlq/internal/spider"
)

// overrideNames returns the settings a run may override (Overrides), by their JSON names.
func overrideNames() []string {
	t := reflect.TypeFor[Overrides]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// DecodeOverrides reads a run's setting overrides from a JSON object (the api's settings, the
// CLI's --settings). An error names the setting by its path under path ("settings.delay"): an
// unknown one with the known one nearest to it, or a value of the wrong type. The values are
// checked when a run is scheduled with them.
func DecodeOverrides(raw []byte, path string) (Overrides, error) {
	var o Overrides
	names := overrideNames()
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return o, fmt.Errorf("%s: want a JSON object of settings (%s)", path, strings.Join(names, ", "))
	}
	for k := range keys {
		if !slices.Contains(names, k) {
			return o, fmt.Errorf("%s.%s: unknown setting%s (a run may override %s)", path, k,
				spider.Suggest(k, names...), strings.Join(names, ", "))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return o, fmt.Errorf("%s.%s: got %s, want %s", path, te.Field, te.Value, te.Type)
		}
		// A duration's own error (Duration.UnmarshalJSON) does not say which field it was:
		// delay is the one duration.
		if strings.Contains(err.Error(), "duration") {
			return o, fmt.Errorf("%s.delay: %v", path, err)
		}
		return o, fmt.Errorf("%s: %v", path, err)
	}
	return o, nil
}
