package spiderstore

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"crawlq/internal/spider"
)

// unknownFields names every key of a spec that spider.Spec does not have, by its path
// ("items[0].fields.price.cs"), where the YAML decoder would name a Go type and a line.
func unknownFields(data []byte) []spider.FieldError {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil || len(doc.Content) == 0 {
		return nil // ParseSpec reports syntax errors
	}
	var errs []spider.FieldError
	walkFields(doc.Content[0], reflect.TypeOf(spider.Spec{}), "", &errs)
	return errs
}

func walkFields(n *yaml.Node, t reflect.Type, path string, errs *[]spider.FieldError) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		known := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			known[tag] = f.Type
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			p := join(path, key)
			ft, ok := known[key]
			if !ok {
				*errs = append(*errs, spider.FieldError{Path: p, Msg: fmt.Sprintf("unknown field (line %d)", n.Content[i].Line)})
				continue
			}
			walkFields(n.Content[i+1], ft, p, errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			walkFields(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkFields(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), errs)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
