# Picks the schemas of e2e/testdata/schemas from the MaskBench dev set. The rule:
# families in order of size (file count in the dev set, ties by name); in each
# family, files in name order; take the first two whose schema
#   - is at most 2,048 bytes as compact JSON,
#   - compiles (dic grammar check reports no compile error), and
#   - bounds how many members and items a document has: every object schema (one
#     with "properties", "patternProperties" or type "object") sets
#     "additionalProperties": false and has no "patternProperties", and every array
#     schema (one with "items", "prefixItems" or type "array") has "maxItems" or is a
#     closed tuple (items/additionalItems false);
# stop when 20 are picked.
import json, glob, os, collections, subprocess, sys, tempfile

SKIP = ('enum', 'const', 'default', 'examples')

def types(x):
    t = x.get('type')
    return t if isinstance(t, list) else [t]

def bounded(x):
    if isinstance(x, dict):
        if 'properties' in x or 'patternProperties' in x or 'object' in types(x):
            if x.get('additionalProperties') is not False or 'patternProperties' in x:
                return False
        if 'items' in x or 'prefixItems' in x or 'array' in types(x):
            tuple_closed = (isinstance(x.get('items'), list) and x.get('additionalItems') is False) or \
                ('prefixItems' in x and x.get('items') is False)
            if 'maxItems' not in x and not tuple_closed:
                return False
        return all(bounded(v) for k, v in x.items() if k not in SKIP)
    if isinstance(x, list):
        return all(bounded(v) for v in x)
    return True

def family(name):
    return name.split('---')[0] if '---' in name else name.rsplit('_', 1)[0]

def main(devset, dic):
    fam = collections.defaultdict(list)
    for f in sorted(glob.glob(os.path.join(devset, '*.json'))):
        fam[family(os.path.basename(f))].append(f)
    tmp = os.path.join(tempfile.gettempdir(), 'pick-schema.json')
    picked = []
    for k in sorted(fam, key=lambda k: (-len(fam[k]), k)):
        n = 0
        for f in fam[k]:
            if n == 2 or len(picked) == 20:
                break
            schema = json.load(open(f))['schema']
            text = json.dumps(schema, separators=(',', ':'))
            if len(text) > 2048 or not bounded(schema):
                continue
            with open(tmp, 'w') as w:
                w.write(text)
            r = subprocess.run([dic, 'grammar', 'check', '--schema', tmp, '--instance', '{}'],
                               capture_output=True, text=True)
            if 'dic: compile:' in r.stderr:
                continue
            picked.append(f)
            n += 1
        if len(picked) == 20:
            break
    for f in picked:
        print(os.path.basename(f))

main(sys.argv[1], sys.argv[2])
