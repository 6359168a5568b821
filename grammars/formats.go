package grammars

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
	// RFC 3986 URI-reference (ASCII only, as rfc3987 reads it; also what url.Parse
	// takes): a URI or a relative reference, see uriRefRE
	"uri-reference": {uriRefRE, true},
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

// uriRefRE is RFC 3986's URI-reference: a URI (scheme ":" hier-part) or a relative
// reference ("//" authority path, an absolute path, a path whose first segment has no
// ':', or nothing), then an optional query and fragment. Characters outside the RFC's
// sets (spaces, non-ASCII, '\\', '%' without two hex digits) are refused. Host names
// take no percent escapes and IPvFuture literals are left out (url.Parse refuses
// some of those).
var uriRefRE = func() string {
	const (
		pct     = `%[0-9A-Fa-f]{2}`
		pchar   = `([A-Za-z0-9._~!$&'()*+,;=:@-]|` + pct + `)`
		pcharNC = `([A-Za-z0-9._~!$&'()*+,;=@-]|` + pct + `)`
		qchar   = `([A-Za-z0-9._~!$&'()*+,;=:@/?-]|` + pct + `)`
	)
	seg := pchar + `*`
	authority := `(([A-Za-z0-9._~!$&'()*+,;=:-]|` + pct + `)*@)?` +
		`(\[` + ipv6RE + `\]|[A-Za-z0-9._~!$&'()*+,;=-]*)(:[0-9]*)?`
	abempty := `(/` + seg + `)*`
	absolute := `/(` + pchar + `+(/` + seg + `)*)?`
	rootless := pchar + `+(/` + seg + `)*`
	noscheme := pcharNC + `+(/` + seg + `)*`
	tail := `(\?` + qchar + `*)?(#` + qchar + `*)?`
	uri := `[A-Za-z][A-Za-z0-9+.-]*:(//` + authority + abempty + `|` + absolute + `|` + rootless + `|)`
	rel := `(//` + authority + abempty + `|` + absolute + `|` + noscheme + `|)`
	return `(` + uri + `|` + rel + `)` + tail
}()

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

// strictFormats replace the validator's own check of formats whose grammar is
// stricter than it, so that the document check and the grammar agree where a string
// meets both a format and a pattern (the grammar then leaves the format to the check):
// uri-reference is RFC 3986 (url.Parse alone takes spaces).
var strictFormats = func() []*jsonschema.Format {
	uriRef := regexp.MustCompile(`^(?:` + uriRefRE + `)$`)
	return []*jsonschema.Format{{Name: "uri-reference", Validate: func(v any) error {
		if s, ok := v.(string); ok && !uriRef.MatchString(s) {
			return errors.New("not an RFC 3986 URI reference")
		}
		return nil
	}}}
}()
