import { OutboxError } from '../errors';

/**
 * Confluent wire format: magic byte 0x00, the schema id as a 4-byte big-endian int, then the Avro binary
 * body. Confluent and Debezium consumers in other languages read exactly this framing.
 */
export const MAGIC_BYTE = 0x00;
export const WIRE_HEADER_BYTES = 5;

export function frameConfluent(schemaId: number, body: Buffer): Buffer {
  if (!Number.isInteger(schemaId) || schemaId < 1 || schemaId > 0x7fffffff) {
    throw new RangeError(`schema id must be an integer in 1..2147483647, got ${schemaId}`);
  }
  const header = Buffer.alloc(WIRE_HEADER_BYTES);
  header.writeUInt8(MAGIC_BYTE, 0);
  header.writeInt32BE(schemaId, 1);
  return Buffer.concat([header, body]);
}

export function unframeConfluent(bytes: Buffer): { schemaId: number; body: Buffer } {
  if (!Buffer.isBuffer(bytes) || bytes.length < WIRE_HEADER_BYTES) {
    throw notConfluent(`it is ${Buffer.isBuffer(bytes) ? `${bytes.length} bytes long` : `a ${typeof bytes}, not a Buffer`}; the header alone is ${WIRE_HEADER_BYTES} bytes`);
  }
  const magic = bytes.readUInt8(0);
  if (magic !== MAGIC_BYTE) {
    // A JSON payload under an Avro content type is the usual mix-up: say so.
    const looksJson = magic === 0x7b || magic === 0x5b;
    throw notConfluent(`its first byte is 0x${magic.toString(16).padStart(2, '0')}, not the magic byte 0x00${looksJson ? ' (it looks like JSON: check the contentType header)' : ''}`);
  }
  const schemaId = bytes.readInt32BE(1);
  if (schemaId < 1) throw notConfluent(`its schema id ${schemaId} is not a valid registry id`);
  return { schemaId, body: bytes.subarray(WIRE_HEADER_BYTES) };
}

function notConfluent(why: string): OutboxError {
  return new OutboxError('DECODE_FAILED', `Cannot decode the Avro payload: ${why}. It was not written by this codec (Confluent wire format).`, {
    details: { reason: 'wire-format' },
  });
}
