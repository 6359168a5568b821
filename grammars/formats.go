package grammars

// Grammars for JSON Schema "format" values (whole-string regexes over the decoded
// characters). exact is false when the format's validator checks more than the regex
// does (days in a month, leap seconds, total lengths): the document check then
// enforces the rest.
var formatRegexes = map[string]struct {
	re    string
	exact bool
}{
	"date":      {`[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])`, false},
	"time":      {`([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`, false},
	"date-time": {`[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[tT]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`, false},
	"uuid":      {`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`, true},
	"ipv4":      {`(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}`, false},
	"ipv6":      {`[0-9a-fA-F:.]*:[0-9a-fA-F:.]*`, false},
	"hostname":  {`[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?`, false},
	"email": {"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|\"[^\"\\\\]*\")@" +
		`([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.IPv]+\])`, false},
	"uri": {`[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x1f\x7f]*`, false},
}

// formatRegex returns the grammar of a format, if there is one.
func formatRegex(name string) (re string, exact, ok bool) {
	f, ok := formatRegexes[name]
	return f.re, f.exact, ok
}

// knownFormat reports formats the validator asserts (and we only check semantically).
func knownFormat(name string) bool {
	switch name {
	case "json-pointer", "relative-json-pointer", "uuid", "duration", "period", "ipv4", "ipv6", "hostname", "email",
		"date", "time", "date-time", "uri", "iri", "uri-reference", "iri-reference", "uri-template", "semver", "regex":
		return true
	}
	return false
}
