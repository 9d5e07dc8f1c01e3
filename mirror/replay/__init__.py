"""The offline (read) side: captures of an archive, replay server, folder and WACZ export."""
