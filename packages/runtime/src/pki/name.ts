/**
 * A certificate subject from its RFC 4514 string (`CN=system:node:real-0, O=system:nodes`), in DER: the
 * relative distinguished names in the order written (`+` joins attributes of one RDN), values escaped
 * with `\` (rdnValue) unescaped, PrintableString when the value allows it, else UTF8String (IA5String for
 * DC and E), as the certificates made before (with @peculiar/x509) encoded them.
 */
import { ia5String, oid, printableString, sequence, set, utf8String } from './der.ts';

const ATTRIBUTES: Readonly<Record<string, string>> = {
  CN: '2.5.4.3',
  SERIALNUMBER: '2.5.4.5',
  C: '2.5.4.6',
  L: '2.5.4.7',
  ST: '2.5.4.8',
  STREET: '2.5.4.9',
  O: '2.5.4.10',
  OU: '2.5.4.11',
  DC: '0.9.2342.19200300.100.1.25',
  E: '1.2.840.113549.1.9.1',
};
const IA5 = new Set(['DC', 'E']);
const PRINTABLE = /^[A-Za-z0-9 '()+,\-./:=?]*$/;

interface Attribute {
  type: string;
  value: string;
}

/** Splits an RFC 4514 string into RDNs of attributes, unescaping values. */
export function parseName(text: string): Attribute[][] {
  const rdns: Attribute[][] = [];
  let rdn: Attribute[] = [];
  let type = '';
  let value = '';
  let inValue = false;
  const finish = () => {
    const t = type.trim().toUpperCase();
    if (!t) throw new Error(`certificate subject "${text}": an attribute without a type`);
    if (!(t in ATTRIBUTES) && !/^\d+(\.\d+)+$/.test(t))
      throw new Error(
        `certificate subject "${text}": unknown attribute type ${t} (use ${Object.keys(ATTRIBUTES).join(', ')} or an OID)`,
      );
    rdn.push({ type: t, value: value.replace(/^ +/, '') });
    type = '';
    value = '';
    inValue = false;
  };
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] ?? '';
    if (!inValue) {
      if (ch === '=') inValue = true;
      else type += ch;
      continue;
    }
    if (ch === '\\') {
      const hex = /^[0-9A-Fa-f]{2}/.exec(text.slice(i + 1, i + 3));
      if (hex) {
        value += String.fromCharCode(Number.parseInt(hex[0], 16));
        i += 2;
      } else {
        value += text[i + 1] ?? '';
        i += 1;
      }
    } else if (ch === ',' || ch === '+') {
      finish();
      if (ch === ',') {
        rdns.push(rdn);
        rdn = [];
      }
    } else value += ch;
  }
  if (type.trim() === '' && !inValue && rdn.length === 0 && rdns.length === 0) return [];
  finish();
  rdns.push(rdn);
  return rdns;
}

/** The DER Name of an RFC 4514 subject. */
export function encodeName(text: string): Buffer {
  return sequence(
    ...parseName(text).map((rdn) =>
      set(
        ...rdn.map(({ type, value }) => {
          const encoded = IA5.has(type)
            ? ia5String(value)
            : PRINTABLE.test(value)
              ? printableString(value)
              : utf8String(value);
          return sequence(oid(ATTRIBUTES[type] ?? type), encoded);
        }),
      ),
    ),
  );
}
