package grammars

import (
	"fmt"
	"strings"
)

// Grammars for JSON Schema "format" values (whole-string regexes over the decoded
// characters), checked against what santhosh-tekuri/jsonschema asserts. exact is true
// when every string the regex matches passes the validator: the regex is then the
// whole check (it may still refuse a few valid strings, as noted). Where exact is
// false the validator checks more than the regex, and the document check enforces
// the rest.
var formatRegexes = map[string]struct {
	re    string
	exact bool
}{
	// time.Parse("2006-01-02"): days per month, February 29 in leap years only
	"date": {dateRE, true},
	// a leap second only as 23:59:60 UTC (Z or a zero offset); the validator also
	// takes it at the local time that is 23:59 UTC under another offset
	"time":      {timeRE, true},
	"date-time": {dateRE + `[tT]` + timeRE, true},
	"uuid":      {`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`, true},
	"ipv4":      {ipv4RE, true},
	// netip.ParseAddr without a zone: groups of 1-4 hex digits, one "::" standing for
	// at least one group, an embedded IPv4 address in the last 32 bits
	"ipv6": {ipv6RE, true},
	// labels of 1-63 characters; stringExpr caps the length at 253 (the validator's
	// limit without the trailing dot)
	"hostname": {hostLabel + `(\.` + hostLabel + `)*\.?`, true},
	// an unquoted local part (atoms and single dots) or a quoted one (printable
	// ASCII without '"' and '\\'), then a host name or an IP literal; stringExpr
	// caps the length at 64 characters, which keeps the validator's limits on the
	// whole address (254), the local part (64) and a label (63)
	"email": {"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|\"[ !#-\\[\\]-~]*\")@" +
		`([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?|\[(IPv6:` + ipv6RE + `|` + ipv4RE + `)\])`, true},
	// url.Parse with a scheme (Go's net/url): a subset that parses, see uriRE
	"uri": {uriRE, true},
}

const (
	dateRE = `([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])` +
		`|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)` +
		`|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])` +
		`|([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[048]|[2468][048]|[13579][26])00)-02-29)`
	timeRE = `(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])` +
		`|23:59:60(\.[0-9]+)?([zZ]|[+-]00:00))`
	ipv4Octet = `(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
	ipv4RE    = ipv4Octet + `(\.` + ipv4Octet + `){3}`
	hostLabel = `[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?`

	// uriRE: a scheme, then "//" and an authority (userinfo without '@' or raw '%',
	// a registered name without ':' '[' '%' or an IPv6 literal, a numeric port) and
	// a path, or a path that starts with one '/', or an opaque part; a raw query; a
	// fragment. Percent signs only in valid escapes (the query excepted, which
	// url.Parse does not check), no control characters. url.Parse also takes raw '%'
	// in opaque parts, zones in IPv6 literals and some characters in host names that
	// this leaves out.
	uriPct = `%[0-9A-Fa-f]{2}`
)

var (
	uriPathChar = `([^\x00-\x1f\x7f?#%]|` + uriPct + `)`
	uriSegStart = `([^\x00-\x1f\x7f?#%/]|` + uriPct + `)`
	uriUser     = `(([A-Za-z0-9._~!$&'()*+,;=:-]|` + uriPct + `)*@)?`
	uriHost     = `(([A-Za-z0-9._~!$&'()*+,;=-]|[^\x00-\x7f])*|\[` + ipv6RE + `\])(:[0-9]*)?`
	uriRE       = `[A-Za-z][A-Za-z0-9+.-]*:` +
		`(//` + uriUser + uriHost + `(/` + uriPathChar + `*)?` +
		`|/(` + uriSegStart + uriPathChar + `*)?` +
		`|(` + uriSegStart + uriPathChar + `*)?)` +
		`(\?[^\x00-\x1f\x7f#]*)?(#([^\x00-\x1f\x7f%]|` + uriPct + `)*)?`
)

// ipv6RE enumerates the IPv6 text forms netip.ParseAddr takes (without a zone).
var ipv6RE = func() string {
	const h = `[0-9A-Fa-f]{1,4}`
	left := func(a int) string { // a groups, each followed by ':'
		if a == 0 {
			return ""
		}
		return fmt.Sprintf(`(%s:){%d}`, h, a)
	}
	right := func(k int) string { // 0 to k groups separated by ':'
		if k == 0 {
			return ""
		}
		return fmt.Sprintf(`(%s(:%s){0,%d})?`, h, h, k-1)
	}
	alts := []string{
		left(7) + h,      // eight groups
		left(6) + ipv4RE, // six groups and IPv4
		`::` + right(7),  // leading ::
		`::` + left(0) + `(` + h + `:){0,5}` + ipv4RE,
	}
	for a := 1; a <= 7; a++ {
		// a groups, "::" (at least one zero group), then up to 7-a groups
		alts = append(alts, left(a-1)+h+`::`+right(7-a))
		if a <= 5 {
			alts = append(alts, left(a-1)+h+`::`+fmt.Sprintf(`(%s:){0,%d}`, h, 5-a)+ipv4RE)
		}
	}
	return `(` + strings.Join(alts, "|") + `)`
}()

// formatMaxLen is a length bound some formats carry (in characters; -1: none).
func formatMaxLen(name string) int {
	switch name {
	case "hostname":
		return 253
	case "email":
		return 64
	}
	return -1
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
