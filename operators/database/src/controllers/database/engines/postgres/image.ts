/**
 * spec.image against spec.version, before any pod runs it: an image whose tag names another major
 * version (postgres:16 for version 15, registry/pg:14.11-alpine) is refused with a message naming
 * spec.image. A tag that names no version (latest, a digest only) cannot be checked here: instance.sh
 * checks the server binary itself (`postgres --version` against PG_MAJOR) and refuses to start.
 */

/** The tag of an image reference (`registry:5000/a/b:tag@sha256:...` -> `tag`), if any. */
export function imageTag(image: string): string | undefined {
  const name = image.split('@')[0] ?? '';
  const last = name.slice(name.lastIndexOf('/') + 1);
  const at = last.lastIndexOf(':');
  return at >= 0 ? last.slice(at + 1) : undefined;
}

/** The major version a tag names (`16`, `16.4`, `16-alpine`, `v15.2`), or undefined. */
export function tagMajor(tag: string | undefined): number | undefined {
  const m = tag?.match(/^v?(\d+)(?:[.\-_]|$)/);
  return m ? Number(m[1]) : undefined;
}

/** Why spec.image cannot run spec.version, or undefined when it can (or cannot be told from the tag). */
export function postgresImageProblem(image: string | undefined, version: string): string | undefined {
  if (!image) return undefined;
  const want = Number.parseInt(version, 10);
  const got = tagMajor(imageTag(image));
  if (got === undefined || got === want) return undefined;
  return (
    `spec.image ${image} is PostgreSQL ${got} by its tag, but spec.version is ${version}: a major version ` +
    `runs only the data directory of that major. Set spec.image to a PostgreSQL ${want} image, or remove ` +
    'it to use the official one.'
  );
}
