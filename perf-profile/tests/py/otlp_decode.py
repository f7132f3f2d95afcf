"""Decodes an OTLP ExportProfilesServiceRequest (a file, or stdin) with the official
opentelemetry-proto package, checks the dictionary's invariants, and prints JSON: the resource
attributes, each profile's id (hex) and sample type, its folded stacks (named as perf-profile's
folded output names frames) and total, the profile attributes, and each sample's stack, value and
attributes (who ran)."""
import json
import sys

from opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2 import (
    ExportProfilesServiceRequest,
)


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def main():
    data = open(sys.argv[1], "rb").read() if len(sys.argv) > 1 else sys.stdin.buffer.read()
    req = ExportProfilesServiceRequest()
    req.ParseFromString(data)
    d = req.dictionary
    s = d.string_table
    # Index 0 of every table is the empty entry.
    assert s[0] == "", "string_table[0] must be empty"
    for name in ["mapping_table", "location_table", "function_table", "stack_table", "attribute_table"]:
        table = getattr(d, name)
        assert len(table) >= 1 and table[0].ByteSize() == 0, name + "[0] must be the empty entry"
    for m in d.mapping_table:
        assert 0 <= m.filename_strindex < len(s)
    for f in d.function_table:
        assert 0 <= f.name_strindex < len(s) and 0 <= f.filename_strindex < len(s)
    for loc in d.location_table:
        assert 0 <= loc.mapping_index < len(d.mapping_table)
        for line in loc.lines:
            assert 0 < line.function_index < len(d.function_table)
    for st in d.stack_table:
        for i in st.location_indices:
            assert 0 < i < len(d.location_table)

    def clean(name):
        return name.replace(";", ":").replace("\n", " ").replace("\r", " ")

    def names(loc):
        if loc.lines:
            return [clean(s[d.function_table[l.function_index].name_strindex]) for l in loc.lines]
        if loc.mapping_index == 0:
            return [hex(loc.address)]
        m = d.mapping_table[loc.mapping_index]
        path = s[m.filename_strindex]
        if path == "[kernel.kallsyms]":
            return [hex(loc.address)]
        off = (loc.address - m.memory_start + m.file_offset) & (2**64 - 1)
        return [clean(path.rsplit("/", 1)[-1]) + "+" + hex(off)]

    out = {"resource": {}, "scope": None, "profiles": []}
    assert len(req.resource_profiles) == 1
    rp = req.resource_profiles[0]
    for kv in rp.resource.attributes:
        out["resource"][kv.key] = value(kv.value)
    for sp in rp.scope_profiles:
        out["scope"] = [sp.scope.name, sp.scope.version]
        for p in sp.profiles:
            folded = {}
            total = 0
            samples = []
            for sample in p.samples:
                assert 0 < sample.stack_index < len(d.stack_table)
                assert len(sample.values) == 1
                frames = []
                for li in d.stack_table[sample.stack_index].location_indices:
                    frames.extend(names(d.location_table[li]))
                line = ";".join(reversed(frames))
                folded[line] = folded.get(line, 0) + sample.values[0]
                who = {}
                for i in sample.attribute_indices:
                    assert 0 < i < len(d.attribute_table)
                    a = d.attribute_table[i]
                    who[s[a.key_strindex]] = value(a.value)
                samples.append({"stack": line, "value": sample.values[0], "attributes": who})
                total += sample.values[0]
            attributes = {}
            for i in p.attribute_indices:
                a = d.attribute_table[i]
                attributes[s[a.key_strindex]] = value(a.value)
            out["profiles"].append(
                {
                    "profile_id": p.profile_id.hex(),
                    "sample_type": [s[p.sample_type.type_strindex], s[p.sample_type.unit_strindex]],
                    "period_type": [s[p.period_type.type_strindex], s[p.period_type.unit_strindex]],
                    "folded": folded,
                    "total": total,
                    "attributes": attributes,
                    "samples": samples,
                }
            )
    json.dump(out, sys.stdout)


main()
