// The JSON body parser of /mutate (src/http/json-body.ts) answers every body as fastify's own parser
// does: the same values, the same 400s for empty and invalid bodies and for poisoned keys however
// they are spelt, and a byte-order mark stripped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { mayBePoisoned, parseJsonBodies } from '../../src/http/json-body.ts';

const BODIES = [
  '{"request":{"uid":"u","object":{"metadata":{"name":"p"}}}}',
  '{"a":"\\u003cb\\u003e \\u00e9"}', // Go's escapes of <, > and é: not poisoning, parsed alike
  '',
  '{',
  '{"a":1,}',
  '[1,2,3]',
  '"text"',
  '\ufeff{"a":1}',
  '{"__proto__":{"x":1}}',
  '{"a":{"__proto__":{"x":1}}}',
  '{"\\u005f_proto__":{"x":1}}',
  '{"\\u005F\\u005F\\u0070\\u0072\\u006f\\u0074\\u006F__":{}}',
  '{"constructor":{"prototype":{"x":1}}}',
  '{"\\u0063onstructor":{"prototype":{"x":1}}}',
  '{"constructor":"a string"}',
  '{"a":"__proto__ in a value"}',
  '{"a":"constructor"}',
  '{"a":' + '['.repeat(20000) + ']'.repeat(20000) + '}',
];

async function answers(withOurs: boolean) {
  const app = Fastify({ logger: false });
  if (withOurs) parseJsonBodies(app);
  app.post('/', async (req) => ({ body: req.body, proto: Object.getPrototypeOf(req.body ?? {}) === Object.prototype }));
  const out = [];
  for (const payload of BODIES) {
    const res = await app.inject({
      method: 'POST',
      url: '/',
      payload,
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    out.push({ payload: payload.slice(0, 60), status: res.statusCode, body: res.body });
  }
  await app.close();
  return out;
}

test("every body is answered as fastify's own JSON parser answers it", async () => {
  const [ours, theirs] = await Promise.all([answers(true), answers(false)]);
  assert.deepEqual(ours, theirs);
  // The set reaches each branch: plain bodies, errors, and those refused for their keys.
  const statuses = new Set(theirs.map((a) => a.status));
  assert.ok(statuses.has(200) && statuses.has(400), JSON.stringify([...statuses]));
  assert.ok(theirs.some((a) => a.status === 400 && a.body.includes('FST_ERR_CTP_EMPTY_JSON_BODY')));
  for (const i of [8, 9, 10, 11, 12, 13]) assert.equal(theirs[i].status, 400, theirs[i].payload);
});

test('only a body that could spell a refused key, or starts with a BOM, takes the slow path', () => {
  for (const body of BODIES.slice(8, 14)) assert.equal(mayBePoisoned(body), true, body);
  assert.equal(mayBePoisoned('\ufeff{}'), true);
  assert.equal(mayBePoisoned(BODIES[0]), false);
  assert.equal(mayBePoisoned(BODIES[1]), false);
});
