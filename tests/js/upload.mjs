// Uploads one file with tus-js-client (the client Uppy uses) and prints what happened as JSON.
// usage: node upload.mjs <endpoint> <token> <file> <chunkSize> <metadata-json> [pauseAt]
// With pauseAt, the upload is paused (abort) once that many bytes are in, then resumed by a
// new Upload that only knows the upload URL, as a page reloaded by the user would.
// With TUS_OVERRIDE_PATCH=1 in the environment, every piece is sent as a POST with
// `X-HTTP-Method-Override: PATCH` (the client's `overridePatchMethod`).
import { readFileSync } from "node:fs";
import * as tus from "tus-js-client";

const [endpoint, token, file, chunkSize, metadataJson, pauseAt] = process.argv.slice(2);
const data = readFileSync(file);
const metadata = JSON.parse(metadataJson);
const result = { pausedAt: null, offsets: [] };

function upload(options) {
  return new Promise((resolve, reject) => {
    const up = new tus.Upload(data, {
      endpoint,
      headers: { Authorization: `Bearer ${token}` },
      chunkSize: Number(chunkSize),
      metadata,
      retryDelays: [],
      uploadDataDuringCreation: true,
      removeFingerprintOnSuccess: true,
      overridePatchMethod: process.env.TUS_OVERRIDE_PATCH === "1",
      onAfterResponse(req, res) {
        const recordId = res.getHeader("Upload-Record-Id");
        if (recordId) result.recordId = recordId;
        const offset = res.getHeader("Upload-Offset");
        if (offset) result.offsets.push(Number(offset));
      },
      onChunkComplete(_size, uploaded) {
        if (options.pauseAt && uploaded >= options.pauseAt && result.pausedAt === null) {
          result.pausedAt = uploaded;
          result.url = up.url;
          up.abort().then(() => resolve("paused"));
        }
      },
      onError: reject,
      onSuccess() {
        result.url = up.url;
        resolve("done");
      },
      ...options.tus,
    });
    up.start();
  });
}

try {
  let outcome = await upload({ pauseAt: pauseAt ? Number(pauseAt) : null });
  if (outcome === "paused") {
    outcome = await upload({ tus: { uploadUrl: result.url } });
  }
  result.outcome = outcome;
  console.log(JSON.stringify(result));
} catch (error) {
  console.log(JSON.stringify({ ...result, error: String(error) }));
  process.exit(1);
}
