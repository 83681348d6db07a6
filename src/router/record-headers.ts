/** The router's side of the record envelope lives in src/envelope; re-exported for the router's modules. */
export { headerText, parseExtraHeaders, parseRecordHeaders, type RecordHeaders } from '../envelope';
