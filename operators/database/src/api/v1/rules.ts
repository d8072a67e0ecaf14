/**
 * The CEL rules (x-kubernetes-validations) the Database CRD carries, generated from constants.ts: the
 * API server checks them on every write, so a bad edit is refused at `kubectl apply` (database.ts lists
 * them).
 */
import {
  ENGINES,
  type EngineName,
  RESERVED_PARAMETERS,
  SUPPORTED_VERSIONS,
  VERSION_UPGRADES,
} from './constants.ts';

const celString = (v: string) => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
export const celList = (vs: readonly string[]) => `[${vs.map(celString).join(', ')}]`;

export type Rule = {
  rule: string;
  messageExpression: string;
  fieldPath: string;
  reason: 'FieldValueForbidden';
};

/**
 * Every rule below reports under its field (fieldPath) with reason FieldValueForbidden: the API server then
 * prints `spec.version: Forbidden: <message>` instead of `Invalid value: "object"` (the rule's type, not
 * the value sent); the messageExpression puts the value sent into the message.
 */
export const FORBIDDEN = 'FieldValueForbidden' as const;

/**
 * The CEL string expression `e` as it goes into a message (unquoted: a '"' in a messageExpression would
 * make the generated YAML differ from what the formatter writes).
 */
export const quoted = (e: string) => e;

/**
 * A CEL expression: version `a` is lower than version `b`, both CEL string expressions of dotted numbers
 * ('8.0', '16'); false when either is not one (the schema or the supported-version rule reports that).
 */
function lowerVersion(a: string, b: string): string {
  const num = "'^[0-9]{1,6}([.][0-9]{1,6})?$'";
  const part = (e: string, i: number) =>
    i === 0 ? `int(${e}.split('.')[0])` : `(${e}.split('.').size() > 1 ? int(${e}.split('.')[1]) : 0)`;
  return (
    `(${a}.matches(${num}) && ${b}.matches(${num}) && ` +
    `(${part(a, 0)} < ${part(b, 0)} || (${part(a, 0)} == ${part(b, 0)} && ${part(a, 1)} < ${part(b, 1)})))`
  );
}

/** spec rule: the version is one SUPPORTED_VERSIONS lists for the engine (an empty one is the schema's). */
export function supportedVersionRule(): Rule {
  const rule = ENGINES.map(
    (e) => `(self.engine == ${celString(e)} && self.version in ${celList(SUPPORTED_VERSIONS[e])})`,
  ).join(' || ');
  const message = ENGINES.reduceRight(
    (rest, e) =>
      `self.engine == ${celString(e)} ? ${celString(
        `: supported ${e} versions are ${SUPPORTED_VERSIONS[e].join(', ')}`,
      )} : ${rest}`,
    celString(''),
  );
  return {
    rule: `self.version == '' || ${rule}`,
    messageExpression: `'unsupported ' + self.engine + ' version ' + ${quoted('self.version')} + (${message})`,
    fieldPath: '.version',
    reason: FORBIDDEN,
  };
}

/** A CEL map literal from version to its position in the list. */
const rankMap = (e: EngineName) =>
  `{${SUPPORTED_VERSIONS[e].map((v, i) => `${celString(v)}: ${i}`).join(', ')}}`;

const DOWNGRADE_ADVICE = 'downgrades are not supported: restore a backup into a new Database instead';

/** spec transition rules on version: no downgrade (to any version), then each engine's upgrade path. */
export function versionTransitionRules(): Rule[] {
  const move = `'version ' + ${quoted('oldSelf.version')} + ' -> ' + ${quoted('self.version')}`;
  const rules: Rule[] = [
    {
      rule: `self.engine != oldSelf.engine || !${lowerVersion('self.version', 'oldSelf.version')}`,
      messageExpression: `${move} + ' is a ' + self.engine + ' downgrade: ' + ${celString(DOWNGRADE_ADVICE)}`,
      fieldPath: '.version',
      reason: FORBIDDEN,
    },
  ];
  for (const e of ENGINES) {
    const same = `self.engine != ${celString(e)} || oldSelf.engine != ${celString(e)} || self.version == oldSelf.version`;
    if (VERSION_UPGRADES[e] === 'never') {
      rules.push({
        rule: `${same} || ${lowerVersion('self.version', 'oldSelf.version')}`,
        messageExpression: `${move} + ${celString(
          `: ${e} major version changes are not done in place (that needs pg_upgrade or a dump and restore): ` +
            'create a new Database with the new version and migrate the data',
        )}`,
        fieldPath: '.version',
        reason: FORBIDDEN,
      });
      continue;
    }
    const m = rankMap(e);
    const known = `!(self.version in ${m}) || !(oldSelf.version in ${m})`;
    rules.push({
      rule: `${same} || ${known} || ${m}[self.version] <= ${m}[oldSelf.version] + 1`,
      messageExpression: `${move} + ${celString(
        `: ${e} upgrades go one release at a time (${SUPPORTED_VERSIONS[e].join(' -> ')}): upgrade to the next version first`,
      )}`,
      fieldPath: '.version',
      reason: FORBIDDEN,
    });
  }
  return rules;
}

/**
 * spec rule: parameters do not set operator-managed settings. The message lists them for the engine (naming
 * the keys sent would need a filter over map keys of unbounded length: over the API server's cost budget).
 */
export function reservedParametersRule(): Rule {
  const checks = ENGINES.map((e) => {
    const key = e === 'mysql' ? `k.lowerAscii().replace('-', '_')` : 'k.lowerAscii()';
    return `(self.engine == ${celString(e)} && self.parameters.exists(k, ${key} in ${celList(RESERVED_PARAMETERS[e])}))`;
  });
  const message = ENGINES.reduceRight(
    (rest, e) =>
      `self.engine == ${celString(e)} ? ${celString(
        `parameters may not set settings the operator manages for ${e}: ${RESERVED_PARAMETERS[e].join(', ')}`,
      )} : ${rest}`,
    celString('parameters may not set settings the operator manages'),
  );
  return {
    rule: `!has(self.parameters) || !(${checks.join(' || ')})`,
    messageExpression: message,
    fieldPath: '.parameters',
    reason: FORBIDDEN,
  };
}

/** spec transition rule: `field` (a string field of the spec) never changes; the message shows the change. */
export function immutableRule(field: string, why: string): Rule {
  return {
    rule: `self.${field} == oldSelf.${field}`,
    messageExpression: `'${field} is immutable (' + ${quoted(`oldSelf.${field}`)} + ' -> ' + ${quoted(`self.${field}`)} + '): ' + ${celString(why)}`,
    fieldPath: `.${field}`,
    reason: FORBIDDEN,
  };
}
