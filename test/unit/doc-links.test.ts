import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The README and every page under docs/: each relative link must name a file that exists, each
 * `#anchor` a heading of the page it points into (GitHub's slugs), no page may hold the same
 * heading twice, and the README stays a front page (at most 300 lines).
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README_MAX_LINES = 300;

/** Pages another branch adds, which may be linked before they exist here (no anchor into them). */
const PENDING_PAGES: ReadonlySet<string> = new Set<string>([]);

/** README.md and every Markdown file under docs/, as paths relative to the repository. */
export function documentationFiles(root: string = ROOT): string[] {
  const found: string[] = ['README.md'];
  const walk = (dir: string) => {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const path = join(dir, name);
      if (statSync(join(root, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  return found;
}

/** The lines of a Markdown text outside fenced code blocks (``` or ~~~), with their 1-based numbers. */
function proseLines(markdown: string): { line: string; number: number }[] {
  const out: { line: string; number: number }[] = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((line, index) => {
    const opener = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && opener !== undefined) fence = opener;
    else if (fence !== undefined && opener !== undefined && opener[0] === fence[0] && opener.length >= fence.length && line.trim() === opener) fence = undefined;
    else if (fence === undefined) out.push({ line, number: index + 1 });
  });
  return out;
}

/** The text of the ATX headings (`# …` to `###### …`) of a Markdown text, outside code blocks. */
export function headings(markdown: string): string[] {
  return proseLines(markdown)
    .map(({ line }) => /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1])
    .filter((text): text is string => text !== undefined);
}

/**
 * GitHub's anchor for a heading: the rendered text (Markdown links and emphasis reduced to their
 * words, code spans to their content), lower-cased, every character that is not a letter, a
 * digit, a space, `-` or `_` dropped, each space turned into `-`.
 */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/<[^>]+>/g, '');
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page, in order: a slug seen before gets `-1`, `-2`, … as on GitHub. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const heading of headings(markdown)) {
    const base = slug(heading);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    out.add(count === 0 ? base : `${base}-${count}`);
  }
  return out;
}

/** Inline links and images `[text](target)` of a Markdown text, outside code blocks and code spans. */
export function links(markdown: string): { target: string; line: number }[] {
  const out: { target: string; line: number }[] = [];
  for (const { line, number } of proseLines(markdown)) {
    const withoutCode = line.replace(/(`+)(?:(?!\1).)*?\1/g, (span) => ' '.repeat(span.length));
    for (const match of withoutCode.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: match[1] ?? '', line: number });
  }
  return out;
}

/** What is wrong with the links of `file` (relative to `root`): one message per broken link. */
export function brokenLinks(file: string, root: string = ROOT): string[] {
  const problems: string[] = [];
  const text = readFileSync(join(root, file), 'utf8');
  for (const { target, line } of links(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:: not ours to resolve
    const [pathPart = '', anchor] = target.split('#', 2);
    const resolved = pathPart === '' ? join(root, file) : resolve(root, dirname(file), decodeURI(pathPart));
    const shown = `${file}:${line}: ${target}`;
    const inRepo = relative(root, resolved);
    if (inRepo.startsWith('..')) {
      problems.push(`${shown} points outside the repository`);
      continue;
    }
    if (!existsSync(resolved)) {
      if (!PENDING_PAGES.has(inRepo) || anchor !== undefined) problems.push(`${shown}: no file ${inRepo}`);
      continue;
    }
    if (anchor === undefined) continue;
    if (!resolved.endsWith('.md') || statSync(resolved).isDirectory()) {
      problems.push(`${shown}: an anchor into ${inRepo}, which is not a Markdown page`);
      continue;
    }
    if (!anchors(readFileSync(resolved, 'utf8')).has(decodeURIComponent(anchor))) problems.push(`${shown}: ${inRepo} has no heading #${anchor}`);
  }
  return problems;
}

/** Headings that appear more than once in a page (by their anchor, so `A` and `a` are one). */
export function repeatedHeadings(markdown: string): string[] {
  const counts = new Map<string, number>();
  for (const heading of headings(markdown)) counts.set(slug(heading), (counts.get(slug(heading)) ?? 0) + 1);
  return headings(markdown).filter((heading, index, all) => (counts.get(slug(heading)) ?? 0) > 1 && all.findIndex((h) => slug(h) === slug(heading)) === index);
}

describe('documentation links (README.md and docs/**/*.md)', () => {
  describe('slug (GitHub anchors)', () => {
    it('lower-cases, drops punctuation but - and _, turns spaces into -', () => {
      expect(slug('How it works (and the decisions where the contract is silent)')).to.equal('how-it-works-and-the-decisions-where-the-contract-is-silent');
      expect(slug('`POST /feedback-record`')).to.equal('post-feedback-record');
      expect(slug('Datasets (`npm run bench:datasets`)')).to.equal('datasets-npm-run-benchdatasets');
      expect(slug('FerretDB v1 versus MongoDB 7: what users notice')).to.equal('ferretdb-v1-versus-mongodb-7-what-users-notice');
      expect(slug('Sharding: shard keys')).to.equal('sharding-shard-keys');
      expect(slug('snake_case and a [link](x.md)')).to.equal('snake_case-and-a-link');
    });

    it('numbers a repeated heading -1, -2, … and ignores # lines inside code blocks', () => {
      const page = '# A\n## Scaling out\n```sh\n# Scaling out\n```\n## Scaling out\n## Scaling out\n';
      expect([...anchors(page)]).to.deep.equal(['a', 'scaling-out', 'scaling-out-1', 'scaling-out-2']);
      expect(repeatedHeadings(page)).to.deep.equal(['Scaling out']);
    });
  });

  describe('links', () => {
    it('finds inline links and images, not those in code spans or fences', () => {
      const page = 'See [a](a.md#x) and ![p](p.svg "t"), not `[b](b.md)`.\n```\n[c](c.md)\n```\n';
      expect(links(page).map((l) => l.target)).to.deep.equal(['a.md#x', 'p.svg']);
    });
  });

  const files = documentationFiles();

  it('covers the README and the pages under docs/', () => {
    expect(files).to.include('README.md');
    expect(files.filter((f) => f.startsWith('docs/')).length).to.be.greaterThan(5);
  });

  it(`README.md has at most ${README_MAX_LINES} lines (the rest belongs in docs/)`, () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length;
    expect(lines).to.be.at.most(README_MAX_LINES);
  });

  for (const file of files) {
    it(`${file}: every relative link and #anchor resolves`, () => {
      expect(brokenLinks(file)).to.deep.equal([]);
    });

    it(`${file}: no heading twice`, () => {
      expect(repeatedHeadings(readFileSync(join(ROOT, file), 'utf8'))).to.deep.equal([]);
    });
  }
});
