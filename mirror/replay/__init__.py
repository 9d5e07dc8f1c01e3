"""The offline (read) side: captures of an archive, replay server, export formats (folder,
WACZ, ZIM: replay/exporters/)."""
