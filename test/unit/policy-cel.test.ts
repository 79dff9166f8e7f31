// The CEL library of tenant policy against the cel-spec conformance data: the slice that policies
// use (no protobuf messages), with the known gaps named, so an upgrade that loses fidelity fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bufbuild, conformanceSlice, score } from '../support/cel-conformance.ts';

test('@bufbuild/cel passes the conformance slice but for its known gaps', () => {
  const { cases, total } = conformanceSlice();
  assert.equal(total, 1707);
  assert.equal(cases.length, 1251);
  const s = score(bufbuild, cases);
  assert.deepEqual(s.core, { passed: 1067, failed: 7 });
  // The 7: backquoted field names (`a.\`b-c\``, cel-spec 0.24) and one heterogeneous-key map lookup.
  assert.deepEqual(
    s.failures.filter((f) => !f.startsWith('macros2/') && !f.startsWith('string_ext/')).map((f) => f.split(':')[0]),
    [
      'fields/field_access_slash',
      'fields/field_access_dash',
      'fields/field_access_dot',
      'fields/has_field_slash',
      'fields/has_field_dash',
      'fields/has_field_dot',
      'fields/map_value_repeat_key_heterogeneous',
    ],
  );
  // Extensions: the strings library fully; two-variable comprehensions (macros2) not at all.
  assert.deepEqual(s.bySuite.string_ext, { passed: 131, failed: 0 });
  assert.deepEqual(s.extensions, { passed: 139, failed: 38 });
});
