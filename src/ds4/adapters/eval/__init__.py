"""ds4 eval's adapters: the case answerers (engine, endpoint), case and trace files."""
