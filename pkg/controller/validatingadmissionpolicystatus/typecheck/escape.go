package typecheck

import "strings"

// celKeywords are the words CEL reserves. A property with one of these
// names is exposed as __<word>__, and selecting it by its plain name
// still works (object.metadata.namespace).
var celKeywords = map[string]bool{
	"true": true, "false": true, "null": true, "in": true,
	"as": true, "break": true, "const": true, "continue": true, "else": true,
	"for": true, "function": true, "if": true, "import": true, "let": true,
	"loop": true, "package": true, "namespace": true, "return": true,
	"var": true, "void": true, "while": true,
}

func isIdentChar(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// escapeFieldName turns an OpenAPI property name into the CEL identifier
// the apiserver exposes it as: "__" becomes "__underscores__", ".", "-"
// and "/" become "__dot__", "__dash__" and "__slash__", and a keyword k
// becomes "__k__". Names starting with a digit, empty names and names with
// any other character are not exposed (ok is false).
func escapeFieldName(name string) (string, bool) {
	if name == "" || ('0' <= name[0] && name[0] <= '9') {
		return "", false
	}
	if celKeywords[name] {
		return "__" + name + "__", true
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' && i+1 < len(name) && name[i+1] == '_':
			b.WriteString("__underscores__")
			i++
		case c == '.':
			b.WriteString("__dot__")
		case c == '-':
			b.WriteString("__dash__")
		case c == '/':
			b.WriteString("__slash__")
		case isIdentChar(c):
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	return b.String(), true
}
