// The review's body parsed as fastify's own JSON parser parses it (the same errors, and the same
// refusal of `__proto__` and `constructor` keys, by secure-json-parse), without that parser's two
// regular expressions over every body: a body in which neither name can be spelt, literally or
// with the `\u005f`-style escapes those expressions look for, and without a byte-order mark, is
// plain `JSON.parse`'s. The scans cost about 2 % of `serve`'s CPU per review (docs/figures.md);
// anything that could be a poisoned key still goes through fastify's parser.
import type { FastifyBodyParser, FastifyInstance } from 'fastify';
import fastify from 'fastify';

const { FST_ERR_CTP_EMPTY_JSON_BODY, FST_ERR_CTP_INVALID_JSON_BODY } = fastify.errorCodes;

/** True when `body` could hold a key secure-json-parse refuses (or a BOM, which it strips). */
export function mayBePoisoned(body: string): boolean {
  return (
    body.charCodeAt(0) === 0xfeff ||
    body.includes('__proto__') ||
    body.includes('constructor') ||
    // The expressions' escapes: \u005f (_), \u0063 to \u006f, \u0070 to \u0075.
    body.includes('\\u005') ||
    body.includes('\\u006') ||
    body.includes('\\u007')
  );
}

/** Replaces `app`'s parser of application/json (before its routes are ready). */
export function parseJsonBodies(app: FastifyInstance): void {
  // fastify's defaults: a key named __proto__ or constructor.prototype is an error (400).
  const guarded = app.getDefaultJsonParser('error', 'error') as FastifyBodyParser<string>;
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body: string, done) => {
    if (body.length === 0) return done(new FST_ERR_CTP_EMPTY_JSON_BODY(), undefined);
    if (mayBePoisoned(body)) return guarded(req, body, done);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return done(new FST_ERR_CTP_INVALID_JSON_BODY(), undefined);
    }
    done(null, parsed);
  });
}
