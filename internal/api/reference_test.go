package api

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"crawlq/internal/crawl"
)

// refAction is one action as docs/api.md documents it.
type refAction struct {
	fields  map[string]string // field -> documented type
	aliases map[string]string // alias -> field
	example string            // the JSON example
}

// readReference parses the docs/api.md section "The api's actions": a "### `action`" heading per
// action, a table whose rows start with "| `field`" (aliases as "(or `alias`)"), and a json block.
func readReference(t *testing.T) map[string]*refAction {
	t.Helper()
	b, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "\n## The api's actions")
	if start < 0 {
		t.Fatal("docs/api.md has no section \"## The api's actions\"")
	}
	s = s[start+1:]
	if end := strings.Index(s[3:], "\n## "); end >= 0 {
		s = s[:end+3]
	}
	heading := regexp.MustCompile("^### `([a-z]+)`$")
	row := regexp.MustCompile("^\\| `([a-z_]+)`((?: \\(or `[a-z_]+`\\))?) \\| ([^|]+) \\|")
	alias := regexp.MustCompile("`([a-z_]+)`")
	out := map[string]*refAction{}
	var cur *refAction
	inJSON := false
	for _, line := range strings.Split(s, "\n") {
		switch {
		case heading.MatchString(line):
			name := heading.FindStringSubmatch(line)[1]
			if out[name] != nil {
				t.Errorf("docs/api.md documents %s twice", name)
			}
			cur = &refAction{fields: map[string]string{}, aliases: map[string]string{}}
			out[name] = cur
		case cur == nil:
		case line == "```json":
			inJSON = true
		case inJSON && line == "```":
			inJSON = false
		case inJSON:
			cur.example += line
		case row.MatchString(line):
			m := row.FindStringSubmatch(line)
			cur.fields[m[1]] = strings.TrimSpace(m[3])
			if m[2] != "" {
				cur.aliases[alias.FindStringSubmatch(m[2])[1]] = m[1]
			}
		}
	}
	return out
}

// rawTypes are the types of the fields decoded by hand from json.RawMessage (see Decode).
var rawTypes = map[string]string{"job": "integer or string", "jobid": "string"}

// docType is how docs/api.md names a field's Go type.
func docType(t *testing.T, name string) string {
	t.Helper()
	if rt, ok := rawTypes[name]; ok {
		return rt
	}
	for _, ty := range []reflect.Type{reflect.TypeFor[Request](), reflect.TypeFor[wire]()} {
		for i := range ty.NumField() {
			f := ty.Field(i)
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != name {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft == reflect.TypeFor[map[string]string]():
				return "object of strings"
			case ft == reflect.TypeFor[crawl.Overrides]():
				return "object"
			case ft == reflect.TypeFor[[]byte]():
				return "string (base64)"
			case ft.Kind() == reflect.String:
				return "string"
			case ft.Kind() == reflect.Bool:
				return "boolean"
			case ft.Kind() == reflect.Int:
				return "integer"
			case ft.Kind() == reflect.Float64:
				return "number"
			}
			t.Fatalf("field %s: Go type %s has no documented name; add it to docType", name, f.Type)
		}
	}
	t.Fatalf("field %s: no field of Request or wire has this json name, and it is not in rawTypes", name)
	return ""
}

// docs/api.md's reference lists every action and every field the decoder takes, with the
// field's type and aliases, and nothing else; each example decodes.
func TestAPIReferenceMatchesTheDecoder(t *testing.T) {
	ref := readReference(t)
	documented := make([]string, 0, len(ref))
	for a := range ref {
		documented = append(documented, a)
	}
	sort.Strings(documented)
	want := slices.Clone(actions)
	sort.Strings(want)
	for _, a := range want {
		if ref[a] == nil {
			t.Errorf("docs/api.md: action %s is not documented", a)
		}
	}
	for _, a := range documented {
		if !slices.Contains(want, a) {
			t.Errorf("docs/api.md documents action %s, which the decoder does not know", a)
		}
	}
	for _, a := range want {
		r := ref[a]
		if r == nil {
			continue
		}
		for _, f := range fields[a] {
			if _, ok := r.fields[f]; !ok {
				t.Errorf("docs/api.md, %s: field %s (taken by the decoder) is missing", a, f)
			}
		}
		for f, ty := range r.fields {
			if f != "project" && !slices.Contains(fields[a], f) {
				t.Errorf("docs/api.md, %s: field %s is documented, but the decoder refuses it", a, f)
				continue
			}
			if got := docType(t, f); ty != got {
				t.Errorf("docs/api.md, %s: field %s is documented as %q; the decoder reads %q", a, f, ty, got)
			}
		}
		for al, f := range r.aliases {
			if aliases[al] != f && !(a == ActSchedule && al == "jobid") {
				t.Errorf("docs/api.md, %s: %s is documented as another name of %s; the decoder's aliases say %q", a, al, f, aliases[al])
			}
		}
		for al, f := range aliases {
			if _, ok := r.fields[f]; ok && slices.Contains(fields[a], f) && r.aliases[al] != f && !(a == ActSchedule && f == "job") {
				t.Errorf("docs/api.md, %s: field %s lacks its other name %s", a, f, al)
			}
		}
		if r.example == "" {
			t.Errorf("docs/api.md, %s: no example", a)
			continue
		}
		req, err := Decode([]byte(r.example))
		if err != nil || req.Action != a {
			t.Errorf("docs/api.md, %s: the example %s does not decode as %s: %v", a, r.example, a, err)
		}
		var m map[string]any
		if json.Unmarshal([]byte(r.example), &m) == nil {
			for k := range m {
				if _, ok := r.fields[k]; !ok && k != "action" && r.aliases[k] == "" {
					t.Errorf("docs/api.md, %s: the example uses %s, which the table lacks", a, k)
				}
			}
		}
	}
}
