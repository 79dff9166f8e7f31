// The shape issue 33 left src/ in, kept: no file over 400 lines, no function over 60 (any
// function-like with a body, from the line it starts on to its closing brace), no `as never`, no
// `(err as Error).message` (errors.ts's errorMessage() reads a caught value), and every
// `as unknown as` says why in a comment on its line or the line above. Read with the compiler's
// parser, so a comment or a string that spells a cast counts for nothing.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';

const REPO = resolve(import.meta.dirname, '../..');
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 60;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

interface Source {
  path: string;
  text: string;
  file: ts.SourceFile;
}

const sources: Source[] = sourceFiles(join(REPO, 'src')).map((f) => {
  const text = readFileSync(f, 'utf8');
  return { path: relative(REPO, f), text, file: ts.createSourceFile(f, text, ts.ScriptTarget.Latest, true) };
});

/** Every node of a file, depth first. */
function* nodes(node: ts.Node): Generator<ts.Node> {
  yield node;
  for (const child of node.getChildren()) yield* nodes(child);
}

/** 1-based line of a position. */
const lineOf = (file: ts.SourceFile, pos: number) => file.getLineAndCharacterOfPosition(pos).line + 1;

/** The 1-based lines a comment touches: the comments are the trivia before and after each token. */
function commentLines(source: Source): Set<number> {
  const lines = new Set<number>();
  for (const node of nodes(source.file)) {
    const ranges = [
      ...(ts.getLeadingCommentRanges(source.text, node.getFullStart()) ?? []),
      ...(ts.getTrailingCommentRanges(source.text, node.getEnd()) ?? []),
    ];
    for (const r of ranges)
      for (let line = lineOf(source.file, r.pos); line <= lineOf(source.file, r.end); line++) lines.add(line);
  }
  return lines;
}

/** `<path>:<line>` of each node of src/ that matches. */
function where(match: (node: ts.Node) => boolean): string[] {
  return sources.flatMap((s) =>
    [...nodes(s.file)].filter(match).map((n) => `${s.path}:${lineOf(s.file, n.getStart(s.file))}`),
  );
}

const isCastTo = (node: ts.Node, kind: ts.SyntaxKind): node is ts.AsExpression =>
  ts.isAsExpression(node) && node.type.kind === kind;

describe('the shape of src/ (issue 33)', () => {
  test(`no file is over ${MAX_FILE_LINES} lines`, () => {
    const long = sources
      .map((s) => ({ path: s.path, lines: s.text.split('\n').length }))
      .filter((s) => s.lines > MAX_FILE_LINES)
      .map((s) => `${s.path}: ${s.lines} lines`);
    assert.deepEqual(long, []);
  });

  test(`no function is over ${MAX_FUNCTION_LINES} lines, from its first line to its closing brace`, () => {
    const long = sources.flatMap((s) =>
      [...nodes(s.file)]
        .filter((n): n is ts.FunctionLikeDeclaration => ts.isFunctionLike(n) && 'body' in n && n.body !== undefined)
        .map((n) => ({ n, lines: lineOf(s.file, n.getEnd()) - lineOf(s.file, n.getStart(s.file)) + 1 }))
        .filter(({ lines }) => lines > MAX_FUNCTION_LINES)
        .map(
          ({ n, lines }) =>
            `${s.path}:${lineOf(s.file, n.getStart(s.file))} ${n.name?.getText(s.file) ?? '(anonymous)'}: ${lines} lines`,
        ),
    );
    assert.deepEqual(long, []);
  });

  test('no `as never`', () => {
    assert.deepEqual(
      where((n) => isCastTo(n, ts.SyntaxKind.NeverKeyword)),
      [],
    );
  });

  test("no `(err as Error).message`: errorMessage() reads a caught value's message", () => {
    const castToError = (n: ts.Expression): boolean => {
      const inner = ts.isParenthesizedExpression(n) ? n.expression : n;
      return (
        ts.isAsExpression(inner) && ts.isTypeReferenceNode(inner.type) && inner.type.typeName.getText() === 'Error'
      );
    };
    assert.deepEqual(
      where((n) => ts.isPropertyAccessExpression(n) && n.name.text === 'message' && castToError(n.expression)),
      [],
    );
  });

  test('each `as unknown as` carries a comment on its line or the line above that says why', () => {
    const silent = sources.flatMap((s) => {
      const comments = commentLines(s);
      return [...nodes(s.file)]
        .filter(
          (n): n is ts.AsExpression => ts.isAsExpression(n) && isCastTo(n.expression, ts.SyntaxKind.UnknownKeyword),
        )
        .map((n) => lineOf(s.file, (n.expression as ts.AsExpression).type.getStart(s.file)))
        .filter((line) => !comments.has(line) && !comments.has(line - 1))
        .map((line) => `${s.path}:${line}`);
    });
    assert.deepEqual(silent, []);
  });

  test('the checks see what they look for (a guard that finds nothing proves nothing)', () => {
    assert.ok(sources.length > 100, `${sources.length} files read`);
    const casts = where((n) => ts.isAsExpression(n) && isCastTo(n.expression, ts.SyntaxKind.UnknownKeyword));
    assert.ok(casts.length > 0, 'src/ has commented `as unknown as` casts for the last check to read');
  });
});
