print("lnote")
