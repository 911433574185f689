import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { _, Ajv2020, str, type ErrorObject, type KeywordCxt, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { parse as parseYaml } from 'yaml';
import { AppError, type ErrorDetail } from '../shared/index.js';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => void;

export type SecurityScheme = 'api_key_v1' | 'management_key' | 'none';

export interface Operation {
  operationId: string;
  method: 'get' | 'put' | 'post' | 'delete' | 'patch';
  /** OpenAPI template, e.g. /v2/customer_sessions/{customerSessionId}; also the metrics label. */
  path: string;
  /** Express form, e.g. /v2/customer_sessions/:customerSessionId */
  expressPath: string;
  security: SecurityScheme;
  hasBody: boolean;
  bodyRequired: boolean;
  validateParams: (path: Record<string, unknown>, query: Record<string, unknown>) => void;
  validateBody: (body: unknown) => void;
}

const defaultDir = fileURLToPath(new URL('../../openapi/', import.meta.url));
const methods = ['get', 'put', 'post', 'delete', 'patch'] as const;

interface ParameterObject {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema?: Record<string, unknown>;
  $ref?: string;
}

/** The documents' operations, each with compiled validators for its parameters and body. */
export function loadOperations(files: readonly string[] = ['integration.yaml', 'management.yaml'], dir = defaultDir): Operation[] {
  const operations: Operation[] = [];
  for (const file of files) {
    const ajvBody = new Ajv2020({ strict: false, allErrors: true });
    const ajvParams = new Ajv2020({ strict: false, allErrors: true, coerceTypes: true, useDefaults: true });
    addFormats(ajvBody);
    addFormats(ajvParams);
    ajvBody.addKeyword(maxUtf8Bytes);
    ajvParams.addKeyword(maxUtf8Bytes);
    if (file === 'management.yaml') {
      ajvBody.addFormat('date-time', storableDateTime);
      ajvParams.addFormat('date-time', storableDateTime);
    }
    const doc = parseYaml(readFileSync(dir + file, 'utf8')) as Record<string, any>;
    const uri = `perkline:${file}`;
    ajvBody.addSchema(doc, uri);
    const resolve = (ref: string): any => ref.slice(2).split('/').reduce((o: any, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths ?? {})) {
      const shared: ParameterObject[] = item.parameters ?? [];
      for (const method of methods) {
        const op = item[method];
        if (!op) continue;
        const params = [...shared, ...(op.parameters ?? [])].map((p: ParameterObject) => (p.$ref ? (resolve(p.$ref) as ParameterObject) : p));
        const schemaFor = (where: 'path' | 'query') => {
          const ps = params.filter((p) => p.in === where);
          return {
            type: 'object',
            properties: Object.fromEntries(ps.map((p) => [p.name, p.schema ?? {}])),
            required: ps.filter((p) => p.required).map((p) => p.name),
          };
        };
        const vPath = ajvParams.compile(schemaFor('path'));
        const vQuery = ajvParams.compile(schemaFor('query'));
        const body = op.requestBody?.content?.['application/json']?.schema;
        const escaped = path.replace(/~/g, '~0').replace(/\//g, '~1');
        const vBody: ValidateFunction | undefined = body
          ? ajvBody.compile({ $ref: `${uri}#/paths/${escaped}/${method}/requestBody/content/application~1json/schema` })
          : undefined;
        const security = op.security ?? doc.security ?? [];
        const scheme = (security.length === 0 ? 'none' : Object.keys(security[0])[0]) as SecurityScheme;
        operations.push({
          operationId: op.operationId,
          method,
          path,
          expressPath: path.replace(/\{([^}]+)\}/g, ':$1'),
          security: scheme,
          hasBody: vBody !== undefined,
          bodyRequired: Boolean(op.requestBody?.required),
          validateParams: (pathParams, query) => {
            const errors: ErrorDetail[] = [];
            if (!vPath(pathParams)) errors.push(...toDetails(vPath.errors, '/path'));
            if (!vQuery(query)) errors.push(...toDetails(vQuery.errors, '/query'));
            if (errors.length > 0) throw invalid(errors);
          },
          validateBody: (value) => {
            if (vBody && !vBody(value)) throw invalid(toDetails(vBody.errors, ''));
          },
        });
      }
    }
  }
  return operations;
}

/**
 * The Management API's `date-time`: RFC 3339 as ajv-formats checks it, that JS reads as a time
 * (ajv-formats also takes an offset of hours alone, "+01", which Date cannot parse: the access log
 * range then threw a RangeError, a 500), and an instant the database stores as such, years 1 to
 * 9999 in UTC (year 0, or 9999-12-31T23:30:00-01:00, failed as a statement: a 400 that could only
 * point at the whole request).
 */
const storableDateTime = {
  type: 'string' as const,
  validate: (value: string): boolean => {
    if (!(fullFormats['date-time'] as { validate: (s: string) => boolean }).validate(value)) return false;
    const t = Date.parse(value);
    if (Number.isNaN(t)) return false;
    const year = new Date(t).getUTCFullYear();
    return year >= 1 && year <= 9999;
  },
};

/**
 * `x-maxUtf8Bytes`: the most bytes a string takes in UTF-8. Profile integration IDs are B-tree
 * index keys in many tables, and an index entry holds about 2,700 bytes: 1000 characters
 * (`maxLength`) may be 4,000 bytes. Checked here, every place a profile ID enters refuses one that
 * cannot be stored with a 400 on its pointer, never a failed insert.
 */
const maxUtf8Bytes = {
  keyword: 'x-maxUtf8Bytes',
  type: 'string' as const,
  schemaType: 'number' as const,
  code(cxt: KeywordCxt) {
    cxt.fail(_`Buffer.byteLength(${cxt.data}, 'utf8') > ${cxt.schema as number}`);
  },
  error: {
    message: ({ schema }: { schema: unknown }) => str`must not have more than ${String(schema)} bytes of UTF-8`,
    params: ({ schema }: { schema: unknown }) => _`{limit: ${Number(schema)}}`,
  },
};

function invalid(errors: ErrorDetail[]): AppError {
  const first = errors[0]!;
  return new AppError('invalid_argument', `Invalid request: ${first.details ?? first.title}`, errors.slice(0, 20));
}

/** Ajv errors as the spec's error entries, each with the JSON pointer of the offending value. */
function toDetails(errors: ErrorObject[] | null | undefined, prefix: string): ErrorDetail[] {
  const seen = new Set<string>();
  const out: ErrorDetail[] = [];
  for (const e of errors ?? []) {
    let pointer = prefix + e.instancePath;
    if (e.keyword === 'required') pointer += '/' + escapePointer((e.params as { missingProperty: string }).missingProperty);
    if (e.keyword === 'additionalProperties') pointer += '/' + escapePointer((e.params as { additionalProperty: string }).additionalProperty);
    // allOf/anyOf wrappers repeat the same complaint; keep the first per pointer and keyword.
    const key = `${pointer}|${e.keyword}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const where = pointer || '/';
    out.push({ title: 'Bad Request', details: `${where} ${e.message ?? 'is invalid'}`, source: { pointer } });
  }
  return out;
}

const escapePointer = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');
