package spider

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// specDocSections maps each heading of docs/spec.md to the Go type whose yaml fields its table
// documents.
var specDocSections = map[string]reflect.Type{
	"## Spider fields":    reflect.TypeOf(Spec{}),
	"## Follow rules":     reflect.TypeOf(FollowRule{}),
	"## Item rules":       reflect.TypeOf(ItemRule{}),
	"### Field rules":     reflect.TypeOf(FieldRule{}),
	"## Retry":            reflect.TypeOf(RetrySpec{}),
	"## Ban":              reflect.TypeOf(BanSpec{}),
	"## Revisit interval": reflect.TypeOf(RevisitSpec{}),
	"## Sitemaps":         reflect.TypeOf(SitemapSpec{}),
	"## Monitors":         reflect.TypeOf(Monitors{}),
	"### items_vs_median": reflect.TypeOf(MedianMonitor{}),
}

// docType is how docs/spec.md names a Go field type; a type missing here fails the test, so a
// new kind of field gets a documented name.
func docType(t reflect.Type) []string {
	switch t {
	case reflect.TypeOf([]FollowRule{}):
		return []string{"list of follow rules"}
	case reflect.TypeOf([]ItemRule{}):
		return []string{"list of item rules"}
	case reflect.TypeOf(map[string]FieldRule{}):
		return []string{"map of field rules"}
	case reflect.TypeOf(&RetrySpec{}):
		return []string{"retry block"}
	case reflect.TypeOf(&BanSpec{}):
		return []string{"ban block"}
	case reflect.TypeOf([]int{}):
		return []string{"list of integers"}
	case reflect.TypeOf(&RevisitSpec{}):
		return []string{"revisit interval block"}
	case reflect.TypeOf(&SitemapSpec{}):
		return []string{"sitemaps block"}
	case reflect.TypeOf(&Monitors{}):
		return []string{"monitors block"}
	case reflect.TypeOf(&MedianMonitor{}):
		return []string{"object"}
	case reflect.TypeOf([]string{}):
		return []string{"list of strings"}
	case reflect.TypeOf(map[string]string{}):
		return []string{"map of strings"}
	case reflect.TypeOf(map[string]float64{}):
		return []string{"map of numbers"}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return []string{"string", "duration"}
	case reflect.Int, reflect.Int64:
		return []string{"integer"}
	case reflect.Float64:
		return []string{"number"}
	case reflect.Bool:
		return []string{"boolean"}
	}
	return nil
}

type specDocRow struct{ typ, def, example, meaning string }

// readSpecDoc parses docs/spec.md's tables: the rows "| `field` | type | default | example |
// meaning |" under each heading of specDocSections.
func readSpecDoc(t *testing.T) map[string]map[string]specDocRow {
	t.Helper()
	b, err := os.ReadFile("../../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\|(.*)\\|$")
	out := map[string]map[string]specDocRow{}
	section := ""
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			section = ""
			if _, ok := specDocSections[line]; ok {
				section = line
				if out[section] != nil {
					t.Errorf("docs/spec.md:%d: section %q twice", i+1, line)
				}
				out[section] = map[string]specDocRow{}
			}
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil || section == "" {
			continue
		}
		cells := strings.Split(m[2], " | ")
		if len(cells) != 4 {
			t.Errorf("docs/spec.md:%d: %s: want 5 cells (field, type, default, example, meaning), got %d", i+1, m[1], len(cells)+1)
			continue
		}
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if _, dup := out[section][m[1]]; dup {
			t.Errorf("docs/spec.md:%d: %s documented twice in %s", i+1, m[1], section)
		}
		out[section][m[1]] = specDocRow{typ: cells[0], def: cells[1], example: cells[2], meaning: cells[3]}
	}
	return out
}

// yamlFields lists a struct's spec fields (their yaml names) and Go types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// Every field a spec may hold is documented in docs/spec.md with its type, default, an example
// and its meaning, and nothing is documented that a spec cannot hold.
func TestSpecDocMatchesTheTypes(t *testing.T) {
	doc := readSpecDoc(t)
	headings := make([]string, 0, len(specDocSections))
	for h := range specDocSections {
		headings = append(headings, h)
	}
	sort.Strings(headings)
	for _, h := range headings {
		typ := specDocSections[h]
		rows, ok := doc[h]
		if !ok {
			t.Errorf("docs/spec.md has no section %q (the fields of %s)", h, typ.Name())
			continue
		}
		fields := yamlFields(typ)
		for name, ft := range fields {
			r, ok := rows[name]
			if !ok {
				t.Errorf("docs/spec.md, %s: field %s (%s.%s) is not documented: add a row", h, name, typ.Name(), name)
				continue
			}
			want := docType(ft)
			if want == nil {
				t.Errorf("%s.%s: Go type %s has no documented name; add it to docType", typ.Name(), name, ft)
			} else if !slices.Contains(want, r.typ) {
				t.Errorf("docs/spec.md, %s: %s is documented as %q; its Go type %s reads as %s", h, name, r.typ, ft, strings.Join(want, " or "))
			}
			if r.def == "" || r.example == "" || r.meaning == "" {
				t.Errorf("docs/spec.md, %s: %s lacks its default, example or meaning", h, name)
			}
		}
		for name := range rows {
			if _, ok := fields[name]; !ok {
				t.Errorf("docs/spec.md, %s: documents %s, which %s does not have (a spec with it is refused)", h, name, typ.Name())
			}
		}
	}
}

// The full example at the top of docs/spec.md is a valid spec.
func TestSpecDocExampleParses(t *testing.T) {
	b, err := os.ReadFile("../../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n```yaml\n")
	example, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("docs/spec.md has no yaml example")
	}
	spec, err := ParseSpec([]byte(example), "docs/spec.md")
	if err != nil {
		t.Fatalf("the example is refused: %v", err)
	}
	if len(spec.Follow) == 0 || len(spec.Items) == 0 || spec.Retry == nil || spec.Monitors == nil {
		t.Errorf("the example should show follow, items, retry and monitors: %+v", spec)
	}
}
