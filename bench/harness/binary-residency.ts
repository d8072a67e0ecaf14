/**
 * Which parts of a process's own executable are resident: each page of its mappings of the binary that
 * is present (/proc/<pid>/pagemap, bit 63), attributed to the symbol that covers it (`nm -C -S`) and
 * grouped (ICU's data, V8's builtins, its compilers, OpenSSL, Node's C++, ...). RSS counts these
 * file-backed pages; this says which of them a workload touched. Linux only; needs `nm` (binutils).
 *
 *   node bench/harness/binary-residency.ts <pid> [--top 20]
 */
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, readlinkSync, readSync } from 'node:fs';

const PAGE = 4096;

interface Sym {
  start: number;
  end: number;
  name: string;
}

/** The groups, first match wins; a page no symbol covers is grouped by its ELF section. */
const GROUPS: [string, RegExp][] = [
  ['ICU data', /^icudt\d+_dat$/],
  ['V8 builtins (embedded)', /^Builtins_/],
  ['V8 TurboFan/Turboshaft', /^v8::internal::compiler::/],
  ['V8 Maglev', /^v8::internal::maglev::/],
  ['V8 wasm', /^v8::internal::wasm::/],
  [
    'V8 heap/GC',
    /^v8::internal::(Heap|Scavenger|MarkCompact|MinorMarkSweep|Sweeper|Concurrent|Incremental|.*Marking|.*Collector)/,
  ],
  ['V8 other', /^(v8::|v8_|disasm::|cppgc::|heap::base::)/],
  ['Node', /^node::/],
  [
    'OpenSSL',
    /^(ossl_|EVP_|SSL_|ssl_|ssl3_|tls|BN_|bn_|EC_|ec_|RSA_|rsa_|X509|x509|ASN1|asn1|CRYPTO|OPENSSL|ERR_|OBJ_|PEM_|BIO_|EVP|sha|SHA|aes|AES|ecp_|nid_objs|k25519|x25519|gcm_|chacha|poly1305)/,
  ],
  ['ICU code', /(icu_\d+|^u[a-z]*_|^U[A-Z]|icu::|propsVectors|propsTrie)/],
  ['nghttp2', /nghttp2/],
  ['libuv', /^uv_|^uv__/],
  ['llhttp', /^llhttp/],
  ['zlib/brotli', /(zlib|deflate|inflate|Brotli|kBrotli|kStaticDictionary|crc32|adler32)/],
  ['sqlite', /sqlite/],
  ['ada/simdutf/simdjson', /^(ada::|simdutf::|simdjson::)/],
  ['C++ runtime, libc glue', /^(std::|__|operator|_GLOBAL__)/],
];

/** A binary's symbols and sections, read once per binary (nm on Node's takes a second or two). */
const tables = new Map<string, { syms: Sym[]; secs: Sym[] }>();

function tablesOf(binary: string): { syms: Sym[]; secs: Sym[] } {
  let t = tables.get(binary);
  if (!t) {
    t = { syms: symbols(binary), secs: sections(binary) };
    tables.set(binary, t);
  }
  return t;
}

function symbols(binary: string): Sym[] {
  const out = execFileSync('nm', ['-C', '-S', '--defined-only', binary], {
    encoding: 'utf8',
    maxBuffer: 256 * 2 ** 20,
  });
  const syms: Sym[] = [];
  for (const line of out.split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) \S (.*)$/.exec(line);
    if (!m) continue;
    const start = Number.parseInt(m[1]!, 16);
    const size = Number.parseInt(m[2]!, 16);
    if (size > 0) syms.push({ start, end: start + size, name: m[3]! });
  }
  return syms.sort((a, b) => a.start - b.start);
}

function sections(binary: string): Sym[] {
  const out = execFileSync('readelf', ['-S', '-W', binary], { encoding: 'utf8' });
  const found: Sym[] = [];
  for (const line of out.split('\n')) {
    const m = /\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)/.exec(line);
    if (!m) continue;
    const start = Number.parseInt(m[2]!, 16);
    const size = Number.parseInt(m[3]!, 16);
    if (start > 0 && size > 0) found.push({ start, end: start + size, name: m[1]! });
  }
  return found.sort((a, b) => a.start - b.start);
}

/** The entry covering addr in a sorted, mostly disjoint list (the last that starts at or before it). */
function covering(list: Sym[], addr: number): Sym | undefined {
  let lo = 0;
  let hi = list.length - 1;
  let best = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid]!.start <= addr) {
      best = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  // Symbols may nest or overlap: look back a little for one that still covers addr.
  for (let i = best; i >= 0 && i > best - 8; i--) if (list[i]!.end > addr) return list[i];
  return undefined;
}

export interface BinaryResidency {
  binary: string;
  residentBytes: number;
  groups: [string, number][];
  topSymbols: [string, number][];
}

/**
 * Resident pages of the process's executable by group and by symbol. A page counts for the symbol
 * covering its last byte, else its first (a page only small symbols cover counts as "no symbol"): the
 * figures are page-grained.
 */
export function readBinaryResidency(pid: number): BinaryResidency {
  const binary = readlinkSync(`/proc/${pid}/exe`);
  const { syms, secs } = tablesOf(binary);
  const pagemap = openSync(`/proc/${pid}/pagemap`, 'r');
  const byGroup = new Map<string, number>();
  const bySymbol = new Map<string, number>();
  let residentBytes = 0;
  try {
    for (const line of readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s+(.*)$/.exec(line);
      if (!m || m[3] !== binary) continue;
      const from = Number.parseInt(m[1]!, 16);
      const to = Number.parseInt(m[2]!, 16);
      const pages = (to - from) / PAGE;
      const entries = Buffer.alloc(pages * 8);
      readSync(pagemap, entries, 0, entries.length, (from / PAGE) * 8);
      for (let i = 0; i < pages; i++) {
        if ((entries.readBigUInt64LE(i * 8) & (1n << 63n)) === 0n) continue;
        residentBytes += PAGE;
        const addr = from + i * PAGE;
        // The symbol covering the page's last byte, else the one covering its first.
        const sym = covering(syms, addr + PAGE - 1) ?? covering(syms, addr);
        const named = sym !== undefined && sym.end > addr;
        const name = named
          ? sym.name
          : `(${covering(secs, addr)?.name ?? 'outside the sections'}, no symbol)`;
        const group = named ? (GROUPS.find(([, re]) => re.test(name))?.[0] ?? 'other') : name;
        byGroup.set(group, (byGroup.get(group) ?? 0) + PAGE);
        bySymbol.set(name, (bySymbol.get(name) ?? 0) + PAGE);
      }
    }
  } finally {
    closeSync(pagemap);
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { binary, residentBytes, groups: sorted(byGroup), topSymbols: sorted(bySymbol) };
}

if (import.meta.main) {
  const pid = Number(process.argv[2]);
  const topIndex = process.argv.indexOf('--top');
  const top = topIndex > 0 ? Number(process.argv[topIndex + 1]) : 20;
  if (!Number.isInteger(pid) || pid <= 0) {
    console.error('usage: node bench/harness/binary-residency.ts <pid> [--top N]');
    process.exit(2);
  }
  const r = readBinaryResidency(pid);
  const mib = (b: number) => (b / 2 ** 20).toFixed(1);
  console.log(`${r.binary}: ${mib(r.residentBytes)} MiB resident\n\n| group | MiB |\n| --- | --- |`);
  for (const [g, b] of r.groups) console.log(`| ${g} | ${mib(b)} |`);
  console.log(`\n| symbol (top ${top}) | MiB |\n| --- | --- |`);
  for (const [s, b] of r.topSymbols.slice(0, top)) console.log(`| ${s.slice(0, 100)} | ${mib(b)} |`);
}
